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

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinfer.h"
#include "gguf_write.h"

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

int giw_write(const gguf_file *src, const eng_model *m, const char *precision, const char *path,
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
    if (gguf_out_open(&o, path, suffix, err, err_len)) {
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
    int e = gguf_out_commit(&o);
    if (e) return snprintf(err, err_len, "%s: write failed: %s", path, strerror(e)), -1;
    return 0;
}
