/*
 * test_model.h — a model compiled and bound below the library API, with one
 * context, for tests that drive the engine directly (parity, KV cache types,
 * recurrent state).
 */
#ifndef CINFER_TEST_MODEL_H
#define CINFER_TEST_MODEL_H

#include <stddef.h>

#include "compiler/compile.h"
#include "engine/engine.h"
#include "formats/gguf.h"

typedef struct {
    gguf_file *g;
    cc_module *mod;
    eng_model em;
    eng_ctx *ctx;
} loaded;

/* gguf_open + cc_build (co) + eng_model_bind + eng_ctx_open (eo) into l; 0,
 * or -1 with err filled and l released. */
int loaded_open(const char *path, const cc_options *co, const eng_ctx_opts *eo, loaded *l, char *err, size_t el);
/* Release everything l holds (a zeroed l: no-op); l is zeroed. */
void unload(loaded *l);

#endif
