/*
 * gguf_edit.h — test helper: a copy of a GGUF file with metadata keys
 * dropped or set (a model without tokenizer.ggml.pre, a chat template that
 * opens <think>), tensors and alignment kept (runtime/formats/gguf_write.h).
 */
#ifndef CINFER_TEST_GGUF_EDIT_H
#define CINFER_TEST_GGUF_EDIT_H

#include <stddef.h>

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

#endif
