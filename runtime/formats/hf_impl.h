/*
 * hf_impl.h — internals shared by the Hugging Face folder loader (hf.c) and
 * its mapping tables (hf_map.c, Lua); not a public header.
 */
#ifndef CINFER_HF_IMPL_H
#define CINFER_HF_IMPL_H

#include <cJSON.h>

#include "hf.h"

/* "hf: " + the message into err (one line); returns code. */
int hf_seterr(char *err, size_t err_len, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Metadata being assembled: key = value, in order; a key added again replaces it. */
typedef struct {
    char *key;
    gguf_value v; /* strings and array payloads point into owned */
    char *owned;  /* payload owned by this entry */
} hf_kv;

typedef struct {
    hf_kv *kv;
    size_t n, cap;
} hf_kv_list;

void hf_kv_free(hf_kv_list *l);
/* Append key = v, taking owned (freed on failure too).  0, or -1 (out of memory). */
int hf_kv_add(hf_kv_list *l, const char *key, gguf_value v, char *owned);
/* A string value owning a copy of s[0..n).  0, or -1. */
int hf_kv_add_str(hf_kv_list *l, const char *key, const char *s, size_t n);

/* Evaluate mapping m against config.json (cfg): its hparams and constants
 * into kvs as "<arch>.KEY", its expect checks.  dir names the folder in
 * messages.  0, or a GGUF_E* code with err. */
int hf_map_eval(hf_map *m, const cJSON *cfg, hf_kv_list *kvs, const char *dir, char *err, size_t err_len);

#endif
