/*
 * gguf_edit.h — test helper: a copy of a GGUF file with metadata keys
 * dropped or set (a model without tokenizer.ggml.pre, a chat template that
 * opens <think>), tensors and alignment kept (runtime/formats/gguf_write.h);
 * or with tensors dropped and added (a model in another tensor layout).
 */
#ifndef CINFER_TEST_GGUF_EDIT_H
#define CINFER_TEST_GGUF_EDIT_H

#include <stddef.h>
#include <stdint.h>

#include "formats/gguf_write.h"

/* Write src to dst without the keys in drop (NULL-terminated, may be NULL)
 * and with the string keys set_keys[i] = set_vals[i] (n_set of them) added or
 * replaced.  0, or -1 after test_fail with the reason. */
int gguf_edit_copy(const char *src, const char *dst, const char *const *drop, const char *const *set_keys,
                   const char *const *set_vals, size_t n_set);

/* The same with typed values (gguf_val_str, gguf_val_u32, a GGUF_VT_BOOL
 * gguf_value ...; runtime/formats/gguf_write.h), at most 16. */
int gguf_edit_copy_vals(const char *src, const char *dst, const char *const *drop, const gguf_kv_set *set,
                        size_t n_set);

/* A tensor to add: F32 data of ne[0] x ne[1] x ... elements (caller-owned). */
typedef struct {
    const char *name;
    uint32_t n_dims;
    int64_t ne[4];
    const float *data;
} gguf_edit_tensor;

/* Write src to dst with the keys set[0..n_set) (any value type) added or
 * replaced, without the tensors named in drop_tensors (NULL-terminated, may
 * be NULL) and with add[0..n_add) appended as F32 tensors.  0, or -1 after
 * test_fail with the reason. */
int gguf_edit_copy_tensors(const char *src, const char *dst, const gguf_kv_set *set, size_t n_set,
                           const char *const *drop_tensors, const gguf_edit_tensor *add, size_t n_add);

#endif
