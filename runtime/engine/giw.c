/*
 * giw.c — write and recognise .giw files (see giw.h).  Reading is the
 * ordinary GGUF loader: a .giw is bound zero-copy like any GGUF because its
 * tensor types already equal the compiled types.
 *
 * The writer re-serialises the source's metadata from the parsed values
 * with gguf_write.h (which also does the temp file + fsync + rename), drops
 * the keys it sets itself (general.alignment, cinfer.*), and lays tensors
 * out in source order at 64-byte aligned offsets.
 */
#include "giw.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinfer.h"
#include "formats/gguf_write.h"
#include "kernels/precision.h"

#define GIW_ALIGNMENT 64u

/* Leading "MAJOR.MINOR" of a version string; -1 when it does not start so. */
static int parse_version(const char *p, size_t n, long *major, long *minor) {
    size_t i = 0;
    long v[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        size_t d0 = i;
        while (i < n && p[i] >= '0' && p[i] <= '9' && i - d0 < 9) v[k] = v[k] * 10 + (p[i++] - '0');
        if (i == d0 || (i < n && p[i] >= '0' && p[i] <= '9')) return -1;
        if (k == 0 && (i >= n || p[i++] != '.')) return -1;
    }
    *major = v[0];
    *minor = v[1];
    return 0;
}

/* Repacked types only come from the precisions that write them, and each
 * tensor's type must be the one the precision gives that tensor
 * (prec_weight_type, the compiler's own rule, applied to a tensor
 * already in that type leaves it unchanged exactly when it is consistent). */
static int check_types(const gguf_file *g, int p, char *err, size_t err_len) {
    for (uint64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        if (t->type < GGUF_CINFER_TYPE_FIRST || t->type > GGUF_CINFER_TYPE_LAST) continue;
        if (p == CINFER_PRECISION_NATIVE || p == CINFER_PRECISION_F32 ||
            prec_weight_type(p, t->name, (int)t->type, (long)t->ne[1], (long)t->ne[0]) != (int)t->type)
            return snprintf(err, err_len, "inconsistent .giw: cinfer.precision is %s but tensor '%s' has type %s, "
                            "which %s does not write; re-create the file with `cinfer compile` from the source GGUF",
                            prec_name(p), t->name, ggml_type_name(t->type), prec_name(p)),
                   -1;
    }
    return 0;
}

int giw_precision(const gguf_file *g, char *err, size_t err_len) {
    if (!gguf_get(g, "cinfer.version")) return -1;
    gguf_str s;
    if (gguf_get_str(g, "cinfer.version", &s, err, err_len)) return -2;
    long fmaj, fmin, maj, min;
    if (parse_version(s.ptr, (size_t)s.len, &fmaj, &fmin))
        return snprintf(err, err_len, "cinfer.version '%.*s' is not a version (expected MAJOR.MINOR.PATCH)",
                        (int)(s.len < 32 ? s.len : 32), s.ptr), -2;
    if (parse_version(CINFER_VERSION, strlen(CINFER_VERSION), &maj, &min) == 0 &&
        (fmaj > maj || (fmaj == 0 && maj == 0 && fmin > min)))
        return snprintf(err, err_len, "written by cinfer %.*s (cinfer.version), newer than this cinfer %s: its "
                        "format may differ; use that version or re-create the .giw with `cinfer compile` from the "
                        "source GGUF", (int)(s.len < 32 ? s.len : 32), s.ptr, CINFER_VERSION), -2;
    if (gguf_get_str(g, "cinfer.precision", &s, err, err_len)) return -2;
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)(s.len < 31 ? s.len : 31), s.ptr);
    int p = s.len < 31 ? prec_from_name(name) : -1;
    if (p < 0) {
        snprintf(err, err_len, "cinfer.precision '%s' is not a precision this cinfer knows", name);
        return -2;
    }
    if (check_types(g, p, err, err_len)) return -2;
    return p;
}

int giw_check_bound(const gguf_file *g, const cf_model_desc *desc, int precision, char *err, size_t err_len) {
    for (int k = 0; k < desc->n_weights; k++) {
        const gguf_tensor *t = gguf_find_tensor(g, desc->weight_names[k]);
        if (t && (int)t->type != desc->weight_types[k])
            return snprintf(err, err_len, "inconsistent .giw: tensor '%s' is %s in the file, but %s (cinfer.precision) "
                            "computes it as %s; re-create the file with `cinfer compile` from the source GGUF",
                            t->name, ggml_type_name(t->type), prec_name(precision),
                            ggml_type_name((uint32_t)desc->weight_types[k])), -1;
    }
    return 0;
}

/* Source keys left out besides the ones giw_write sets: any other cinfer.* key
 * of a .giw source. */
static bool is_cinfer_key(gguf_str k, const void *user) {
    (void)user;
    return k.len >= 7 && !memcmp(k.ptr, "cinfer.", 7);
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

static int write_locked(const gguf_file *src, const eng_model *m, const char *precision, const char *path,
              char *err, size_t err_len) {
    char fp[32], suffix[32];
    if (!precision) return snprintf(err, err_len, "%s: no precision to record", path), -1;
    /* A .giw made from a .giw keeps the original source's fingerprint. */
    gguf_str sfp;
    char e2[256];
    if (gguf_get(src, "cinfer.source_fingerprint") &&
        !gguf_get_str(src, "cinfer.source_fingerprint", &sfp, e2, sizeof e2))
        snprintf(fp, sizeof fp, "%.*s", (int)(sfp.len < 31 ? sfp.len : 31), sfp.ptr);
    else
        snprintf(fp, sizeof fp, "%016llx", (unsigned long long)gguf_fingerprint(src));

    uint64_t n_tensors = gguf_n_tensors(src);
    giw_tensor *ts = calloc(n_tensors ? n_tensors : 1, sizeof *ts);
    if (!ts) return snprintf(err, err_len, "%s: out of memory", path), -1;
    for (uint64_t i = 0; i < n_tensors; i++) compiled_tensor(src, m, i, &ts[i]);

    gguf_out o;
    snprintf(suffix, sizeof suffix, ".tmp.%d", (int)getpid());
    if (gguf_out_open(&o, path, suffix, src, err, err_len)) {
        free(ts);
        return -1;
    }
    gguf_writer *w = &o.w;
    const gguf_kv_set set[] = {
        {"general.alignment", gguf_val_u32(GIW_ALIGNMENT)},
        {"cinfer.version", gguf_val_str(CINFER_VERSION)},
        {"cinfer.precision", gguf_val_str(precision)},
        {"cinfer.source_fingerprint", gguf_val_str(fp)},
    };
    gguf_w_header(w, src, n_tensors, is_cinfer_key, NULL, set, sizeof set / sizeof set[0]);
    uint64_t off = 0;
    for (uint64_t i = 0; i < n_tensors; i++) {
        const gguf_tensor *t = gguf_tensor_at(src, i);
        gguf_w_tensor_info(w, t->name, t->n_dims, t->ne, ts[i].type, off);
        off += gguf_align_up(ts[i].n_bytes, GIW_ALIGNMENT);
    }
    gguf_w_pad(w, GIW_ALIGNMENT);
    for (uint64_t i = 0; i < n_tensors && !w->err; i++) {
        gguf_w_bytes(w, ts[i].data, (size_t)ts[i].n_bytes);
        gguf_w_pad(w, GIW_ALIGNMENT);
    }
    free(ts);
    char ce[1024];
    if (gguf_out_commit(&o, ce, sizeof ce)) return snprintf(err, err_len, "%s", ce), -1;
    return 0;
}

/* One save at a time per process: the temporary name is path.tmp.<pid>, so
 * two threads saving the same path would otherwise share (and unlink) it. */
int giw_write(const gguf_file *src, const eng_model *m, const char *precision, const char *path,
              char *err, size_t err_len) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    int rc = write_locked(src, m, precision, path, err, err_len);
    pthread_mutex_unlock(&lock);
    return rc;
}
