/*
 * eng_cuda.h — runs a compiled CUDA forward pass (--device cuda, docs/cuda.md):
 * weights uploaded once in their GGUF layout, the KV cache, activations and
 * logits in device memory, one launch per kernel of the generated module, and
 * each decode step (one token) replayed as a CUDA graph captured on the
 * context's first step.
 *
 * Two halves, like the generated code.  The planning half is host-only and
 * testable without a GPU: it runs the module's cf_cuda_forward with launch
 * requests that record, per kernel, its name slot and its grid and block
 * (ecu_plan_build), and it lays out the weights in device memory
 * (ecu_weight_layout) and sizes a context (ecu_ctx_bytes_for).  The device
 * half (ecu_model_new, ecu_ctx_new, ecu_eval) turns plans into cuLaunchKernel
 * calls through runtime/gpu/cuda.h.
 *
 * An ecu_model is read-only after ecu_model_new and may serve several
 * contexts; an ecu_ctx is used by one thread at a time (any thread: each
 * call makes the device's context current).
 */
#ifndef CINFER_ENG_CUDA_H
#define CINFER_ENG_CUDA_H

#include <stddef.h>

#include "formats/gguf.h"
#include "gpu/cuda.h"
#include "prelude.h"
#include "prelude_cuda.h"

/* ---- planning (host only) ---------------------------------------------------- */

typedef struct {
    const char *kernel; /* its name: a string of the module's host half (stable for the module's life) */
    int op;             /* the op's index, for messages */
    unsigned grid[2];   /* x, y (z is 1) */
    unsigned block;     /* threads (y, z are 1); shared memory is static */
    long out, in[3];    /* cf_cuda_args: arena offsets in floats, -1 for none */
    int w, w2, layer;   /* weight slots (-1 for none), the KV layer */
} ecu_launch;

typedef struct {
    ecu_launch *l;       /* room for cap launches; more are counted in n but not stored */
    int n, cap;
    /* what the plan is for (set before ecu_plan_build) */
    int want_hidden;     /* the final hidden states are read back (embeddings) */
    int logits_all;      /* logits of every token, not only the last */
    int att_splits;      /* decode attention splits: ecu_att_splits(n_ctx) */
    /* what it found */
    long scratch_floats; /* decode attention partials it needs */
    char err[256];       /* the first request the kernels cannot serve, "" when none */
} ecu_plan;

/* Reset p's outputs and record the launches of one forward call of T
 * tokens.  -1 with p->err's message when a request is outside the kernels'
 * geometry. */
int ecu_plan_build(ecu_plan *p, void (*forward)(cf_cuda_host *), int T, char *err, size_t err_len);
/* ceil(n_ctx / CFK_ATT_SPLIT) */
int ecu_att_splits(int n_ctx);

/* Device memory alignment of every buffer and weight. */
#define ECU_ALIGN 256

/* Weight i of d goes to [off[i], off[i] + bytes[i]) of one allocation of
 * *total bytes: the tensor's GGUF bytes unchanged, each ECU_ALIGN-aligned,
 * in slot order.  The file must hold every weight in the type and shape d
 * was compiled for (the CUDA path never repacks).  Errors: -1, "tensor 'x':
 * type Q5_K in the file, compiled for Q4_K" / "... the file lacks it". */
int ecu_weight_layout(const gguf_file *g, const cf_model_desc *d, size_t *off, size_t *bytes, size_t *total,
                      char *err, size_t err_len);

/* Device bytes a context takes, by buffer (each rounded up to ECU_ALIGN). */
typedef struct {
    size_t kv;      /* K and V caches of every layer: 2 * n_ctx * kv_dim * 4 */
    size_t arena;   /* activations */
    size_t logits;  /* (logits_all ? n_batch : 1) * n_vocab * 4 */
    size_t hidden;  /* n_batch * n_embd * 4 */
    size_t scratch; /* decode attention partials */
    size_t env;     /* cf_cuda_env + the step's tokens + the KV pointer table */
    size_t total;
} ecu_ctx_bytes;
int ecu_ctx_bytes_for(const cf_model_desc *d, void (*forward)(cf_cuda_host *), int n_ctx, int logits_all,
                      ecu_ctx_bytes *out, char *err, size_t err_len);

/* ---- device -------------------------------------------------------------------- */

typedef struct ecu_model ecu_model;
typedef struct ecu_ctx ecu_ctx;

/* Load image (cubin or PTX) as a module on dev, resolve every kernel a plan
 * can ask for (T = 1, 2 and n_batch, with and without hidden states and all
 * logits) and upload g's weights.  dev and g must outlive the model.
 * Errors: -1, "cuModuleLoadData: ...", "the CUDA module lacks kernel cf_mv_...",
 * "cuMemAlloc (1.2 GiB of weights): CUDA_ERROR_OUT_OF_MEMORY (...)". */
int ecu_model_new(const cuda_dev *dev, const gguf_file *g, const cf_model_desc *d,
                  void (*forward)(cf_cuda_host *), const cuda_image *image, ecu_model **out, char *err,
                  size_t err_len);
void ecu_model_free(ecu_model *m);
size_t ecu_model_weight_bytes(const ecu_model *m);

/* A context of n_ctx positions (> 0): every device buffer, the pinned
 * staging block and the stream, allocated here; none later. */
int ecu_ctx_new(const ecu_model *m, int n_ctx, int logits_all, ecu_ctx **out, char *err, size_t err_len);
void ecu_ctx_free(ecu_ctx *c);

/* One forward call: tokens[0..n) (1 <= n <= n_batch) at positions pos..,
 * which the caller keeps within n_ctx.  logits (host) receives (logits_all ?
 * n : 1) rows of n_vocab; hidden (host, may be NULL) n rows of n_embd.  A
 * single token without hidden runs the context's decode graph. */
int ecu_eval(ecu_ctx *c, const int *tokens, int n, int pos, float *logits, float *hidden, char *err,
             size_t err_len);

#endif
