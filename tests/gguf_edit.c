/*
 * gguf_edit.c — see gguf_edit.h.
 */
#include "gguf_edit.h"

#include <string.h>

#include "formats/gguf.h"
#include "formats/gguf_write.h"
#include "test.h"

int gguf_edit_copy(const char *src, const char *dst, const char *const *drop, const char *const *set_keys,
                   const char *const *set_vals, size_t n_set) {
    gguf_kv_set set[16];
    size_t n = 0;
    for (size_t k = 0; k < n_set && n < 16; k++) set[n++] = (gguf_kv_set){set_keys[k], gguf_val_str(set_vals[k])};
    return gguf_edit_copy_vals(src, dst, drop, set, n);
}

int gguf_edit_copy_vals(const char *src, const char *dst, const char *const *drop, const gguf_kv_set *set,
                        size_t n) {
    gguf_file *g;
    char e[512];
    if (n > 16) return test_fail(__FILE__, __LINE__, "gguf_edit: %zu keys, at most 16", n), -1;
    if (gguf_open(src, &g, e, sizeof e)) return test_fail(__FILE__, __LINE__, "%s", e), -1;
    gguf_out o;
    if (gguf_out_open(&o, dst, ".partial", g, e, sizeof e)) {
        gguf_close(g);
        return test_fail(__FILE__, __LINE__, "%s", e), -1;
    }
    uint32_t align = gguf_alignment(g);
    uint64_t nt = gguf_n_tensors(g), off = 0;
    gguf_w_header(&o.w, g, nt, drop ? gguf_key_in_list : NULL, drop, set, n);
    for (uint64_t i = 0; i < nt; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        gguf_w_tensor_info(&o.w, t->name, t->n_dims, t->ne, t->type, off);
        off += gguf_align_up(t->n_bytes, align);
    }
    gguf_w_pad(&o.w, align);
    for (uint64_t i = 0; i < nt; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        gguf_w_bytes(&o.w, t->data, (size_t)t->n_bytes);
        gguf_w_pad(&o.w, align);
    }
    int rc = gguf_out_commit(&o, e, sizeof e);
    gguf_out_abort(&o);
    gguf_close(g);
    if (rc) test_fail(__FILE__, __LINE__, "%s", e);
    return rc ? -1 : 0;
}

static int dropped(const char *name, const char *const *drop) {
    for (const char *const *d = drop; d && *d; d++)
        if (!strcmp(*d, name)) return 1;
    return 0;
}

static uint64_t n_elems(const gguf_edit_tensor *t) {
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) n *= (uint64_t)t->ne[d];
    return n;
}

int gguf_edit_copy_tensors(const char *src, const char *dst, const gguf_kv_set *set, size_t n_set,
                           const char *const *drop_tensors, const gguf_edit_tensor *add, size_t n_add) {
    gguf_file *g;
    char e[512];
    if (gguf_open(src, &g, e, sizeof e)) return test_fail(__FILE__, __LINE__, "%s", e), -1;
    gguf_out o;
    if (gguf_out_open(&o, dst, ".partial", g, e, sizeof e)) {
        gguf_close(g);
        return test_fail(__FILE__, __LINE__, "%s", e), -1;
    }
    uint32_t align = gguf_alignment(g);
    uint64_t nt = gguf_n_tensors(g), n_keep = 0, off = 0;
    for (uint64_t i = 0; i < nt; i++) n_keep += !dropped(gguf_tensor_at(g, i)->name, drop_tensors);
    gguf_w_header(&o.w, g, n_keep + n_add, NULL, NULL, set, n_set);
    for (uint64_t i = 0; i < nt; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        if (dropped(t->name, drop_tensors)) continue;
        gguf_w_tensor_info(&o.w, t->name, t->n_dims, t->ne, t->type, off);
        off += gguf_align_up(t->n_bytes, align);
    }
    for (size_t k = 0; k < n_add; k++) {
        gguf_w_tensor_info(&o.w, add[k].name, add[k].n_dims, add[k].ne, 0 /* F32 */, off);
        off += gguf_align_up(n_elems(&add[k]) * sizeof(float), align);
    }
    gguf_w_pad(&o.w, align);
    for (uint64_t i = 0; i < nt; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        if (dropped(t->name, drop_tensors)) continue;
        gguf_w_bytes(&o.w, t->data, (size_t)t->n_bytes);
        gguf_w_pad(&o.w, align);
    }
    for (size_t k = 0; k < n_add; k++) {
        gguf_w_bytes(&o.w, add[k].data, (size_t)(n_elems(&add[k]) * sizeof(float)));
        gguf_w_pad(&o.w, align);
    }
    int rc = gguf_out_commit(&o, e, sizeof e);
    gguf_out_abort(&o);
    gguf_close(g);
    if (rc) test_fail(__FILE__, __LINE__, "%s", e);
    return rc ? -1 : 0;
}
