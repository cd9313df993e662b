/*
 * giw.c — write and recognise .giw files (see giw.h).  Reading is the
 * ordinary GGUF loader: a .giw is bound zero-copy like any GGUF because its
 * tensor types already equal the compiled types.
 *
 * The writer re-serialises the source's metadata from the parsed values
 * (gguf.md encoding: u64-length strings, u32 value types, arrays as u32
 * element type + u64 count + elements, nested arrays recursively), drops the
 * keys it sets itself, and lays tensors out in source order at 64-byte
 * aligned offsets.
 */
#include "giw.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinfer.h"

#define GIW_ALIGNMENT 64u

int giw_precision(const gguf_file *g, char *err, size_t err_len) {
    if (!gguf_get(g, "cinfer.version")) return -1;
    gguf_str s;
    if (gguf_get_str(g, "cinfer.precision", &s, err, err_len)) return -2;
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)(s.len < 31 ? s.len : 31), s.ptr);
    int p = s.len < 31 ? cinfer_precision_from_name(name) : -1;
    if (p < 0) {
        snprintf(err, err_len, "cinfer.precision '%s' is not a precision this cinfer knows", name);
        return -2;
    }
    return p;
}

/* ---- a checked writer ------------------------------------------------------- */

typedef struct {
    FILE *f;
    uint64_t off; /* bytes written */
    int bad;
} wr;

static void w_bytes(wr *w, const void *p, size_t n) {
    if (w->bad || !n) return;
    if (fwrite(p, 1, n, w->f) != n) w->bad = errno ? errno : EIO;
    w->off += n;
}
static void w_u32(wr *w, uint32_t v) { w_bytes(w, &v, 4); }
static void w_u64(wr *w, uint64_t v) { w_bytes(w, &v, 8); }
static void w_str(wr *w, const char *p, uint64_t n) {
    w_u64(w, n);
    w_bytes(w, p, (size_t)n);
}
static void w_pad(wr *w, uint32_t align) {
    static const uint8_t zeros[GIW_ALIGNMENT];
    w_bytes(w, zeros, (size_t)((align - w->off % align) % align));
}

/* The payload of value v (type v->type) as gguf.md encodes it. */
static void w_value(wr *w, const gguf_value *v) {
    switch (v->type) {
    case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32: case GGUF_VT_UINT64:
        w_bytes(w, &v->v.u64, gguf_vtype_size(v->type)); /* little-endian: the low bytes */
        break;
    case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64:
        w_bytes(w, &v->v.i64, gguf_vtype_size(v->type));
        break;
    case GGUF_VT_FLOAT32: {
        float f = (float)v->v.f64;
        w_bytes(w, &f, 4);
        break;
    }
    case GGUF_VT_FLOAT64: w_bytes(w, &v->v.f64, 8); break;
    case GGUF_VT_BOOL: {
        uint8_t b = v->v.b;
        w_bytes(w, &b, 1);
        break;
    }
    case GGUF_VT_STRING: w_str(w, v->v.str.ptr, v->v.str.len); break;
    case GGUF_VT_ARRAY:
        w_u32(w, v->v.arr.type);
        w_u64(w, v->v.arr.n);
        if (v->v.arr.type == GGUF_VT_STRING)
            for (uint64_t i = 0; i < v->v.arr.n; i++) w_str(w, v->v.arr.strs[i].ptr, v->v.arr.strs[i].len);
        else if (v->v.arr.type == GGUF_VT_ARRAY)
            for (uint64_t i = 0; i < v->v.arr.n; i++) w_value(w, &v->v.arr.elems[i]);
        else
            w_bytes(w, v->v.arr.data, (size_t)(v->v.arr.n * gguf_vtype_size(v->v.arr.type)));
        break;
    default: w->bad = EINVAL;
    }
}

static int is_own_key(gguf_str k) {
    return (k.len >= 7 && !memcmp(k.ptr, "cinfer.", 7)) || gguf_str_eq(k, "general.alignment");
}

/* What tensor i of src becomes: data, type and bytes. */
typedef struct {
    const void *data;
    uint32_t type;
    uint64_t n_bytes;
} giw_tensor;

static void compiled_tensor(const gguf_file *src, const eng_model *m, uint64_t i, giw_tensor *o) {
    const gguf_tensor *t = gguf_tensor_at(src, i);
    *o = (giw_tensor){t->data, t->type, t->n_bytes};
    for (int k = 0; k < m->desc->n_weights; k++)
        if (!strcmp(m->desc->weight_names[k], t->name)) {
            o->data = m->W[k];
            o->type = (uint32_t)m->desc->weight_types[k];
            o->n_bytes = ggml_row_bytes(o->type, (uint64_t)t->ne[0]) * (t->n_elems / (uint64_t)t->ne[0]);
            return;
        }
}

int giw_write(const gguf_file *src, const eng_model *m, const char *precision, const char *path,
              char *err, size_t err_len) {
    char tmp[4096], fp[32];
    if (!precision) return snprintf(err, err_len, "%s: no precision to record", path), -1;
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
        return snprintf(err, err_len, "%s: path too long", path), -1;
    /* A .giw made from a .giw keeps the original source's fingerprint. */
    gguf_str sfp;
    char e2[256];
    if (gguf_get(src, "cinfer.source_fingerprint") &&
        !gguf_get_str(src, "cinfer.source_fingerprint", &sfp, e2, sizeof e2))
        snprintf(fp, sizeof fp, "%.*s", (int)(sfp.len < 31 ? sfp.len : 31), sfp.ptr);
    else
        snprintf(fp, sizeof fp, "%016llx", (unsigned long long)gguf_fingerprint(src));

    uint64_t n_tensors = gguf_n_tensors(src), n_kv = 0;
    for (uint64_t i = 0; i < gguf_n_kv(src); i++) n_kv += !is_own_key(gguf_kv_at(src, i)->key);
    giw_tensor *ts = calloc(n_tensors ? n_tensors : 1, sizeof *ts);
    if (!ts) return snprintf(err, err_len, "%s: out of memory", path), -1;
    for (uint64_t i = 0; i < n_tensors; i++) compiled_tensor(src, m, i, &ts[i]);

    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        free(ts);
        unlink(tmp);
        return snprintf(err, err_len, "%s: %s", tmp, strerror(e)), -1;
    }
    wr w = {.f = f};
    errno = 0;
    w_bytes(&w, "GGUF", 4);
    w_u32(&w, 3);
    w_u64(&w, n_tensors);
    w_u64(&w, n_kv + 4);
    for (uint64_t i = 0; i < gguf_n_kv(src); i++) {
        const gguf_kv *kv = gguf_kv_at(src, i);
        if (is_own_key(kv->key)) continue;
        w_str(&w, kv->key.ptr, kv->key.len);
        w_u32(&w, kv->value.type);
        w_value(&w, &kv->value);
    }
    static const char *const keys[] = {"cinfer.version", "cinfer.precision",
                                       "cinfer.source_fingerprint"};
    const char *vals[] = {CINFER_VERSION, precision, fp};
    w_str(&w, "general.alignment", strlen("general.alignment"));
    w_u32(&w, GGUF_VT_UINT32);
    w_u32(&w, GIW_ALIGNMENT);
    for (int k = 0; k < 3; k++) {
        w_str(&w, keys[k], strlen(keys[k]));
        w_u32(&w, GGUF_VT_STRING);
        w_str(&w, vals[k], strlen(vals[k]));
    }
    uint64_t off = 0;
    for (uint64_t i = 0; i < n_tensors; i++) {
        const gguf_tensor *t = gguf_tensor_at(src, i);
        w_str(&w, t->name, strlen(t->name));
        w_u32(&w, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) w_u64(&w, (uint64_t)t->ne[d]);
        w_u32(&w, ts[i].type);
        w_u64(&w, off);
        off += (ts[i].n_bytes + GIW_ALIGNMENT - 1) / GIW_ALIGNMENT * GIW_ALIGNMENT;
    }
    w_pad(&w, GIW_ALIGNMENT);
    for (uint64_t i = 0; i < n_tensors && !w.bad; i++) {
        w_bytes(&w, ts[i].data, (size_t)ts[i].n_bytes);
        w_pad(&w, GIW_ALIGNMENT);
    }
    free(ts);
    if (!w.bad && fflush(f)) w.bad = errno ? errno : EIO;
    if (!w.bad && fsync(fileno(f))) w.bad = errno ? errno : EIO;
    if (fclose(f) && !w.bad) w.bad = errno ? errno : EIO;
    if (!w.bad && rename(tmp, path)) w.bad = errno ? errno : EIO;
    if (w.bad) {
        unlink(tmp);
        return snprintf(err, err_len, "%s: write failed: %s", path, strerror(w.bad)), -1;
    }
    return 0;
}
