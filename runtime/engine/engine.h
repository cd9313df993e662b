/*
 * engine.h — runs a compiled forward pass: binds GGUF tensors to the weight
 * slots a generated module declares, owns the activation arena, the KV cache
 * and the thread pool, and feeds token batches through cf_forward.
 *
 * An eng_model (bound weights) is read-only after eng_model_bind and can be
 * shared by several eng_ctx; each eng_ctx (one sequence: KV cache, arena,
 * logits, pool) is used by one thread at a time.
 */
#ifndef CINFER_ENGINE_H
#define CINFER_ENGINE_H

#include <stddef.h>

#include "formats/gguf.h"
#include "base/pool.h"
#include "gpu/cuda.h"
#include "prelude.h"
#include "prelude_cuda.h"
#include "stream.h"

struct ecu_model;
struct ecu_ctx;

typedef struct {
    const gguf_file *g;        /* borrowed: must outlive the model */
    const cf_model_desc *desc; /* from the generated module */
    void (*forward)(cf_env *E);
    const void **W;            /* (desc->n_weights) tensor data: in the mapping, or a
                                * repacked copy when the compiled type differs */
    void *region;              /* every repacked weight (each 64-byte aligned), or NULL */
    int n_repacked;            /* weights repacked at bind */
    size_t repacked_bytes;     /* bytes of `region` */
    double repack_ms;          /* wall time of the repacking */
    struct ecu_model *cuda;    /* --device cuda: the weights on the GPU (eng_cuda.h); W is NULL */
    eng_stream *stream;        /* streamed weights (eng_model_bind_streamed), or NULL */
} eng_model;

typedef struct {
    const eng_model *m;
    pool *pool;
    float *arena;   /* (desc->arena_floats) */
    float **kv_k;   /* (n_layer) each (n_ctx, kv_dim[l]) */
    float **kv_v;   /* (n_layer) each (n_ctx, kv_dim_v[l]), NULL where that is 0 */
    float *logits;  /* (n_logits_cap, n_vocab) */
    int *positions; /* (n_batch) positions of the current batch */
    int n_ctx;      /* positions the KV cache holds */
    int n_past;     /* positions already evaluated */
    int logits_all; /* keep logits of every token of the last eval batch */
    int n_logits;   /* rows valid in logits after the last eval */
    cf_env env;     /* CPU; on CUDA only env.hidden is read (embeddings) */
    const cf_kernels *kern_base; /* the ISA's kernel table; env.K is kern_stream when streaming */
    cf_kernels kern_stream;      /* kern_base with matmul reporting its weight to the stream */
    struct ecu_ctx *cuda; /* --device cuda: KV cache, arena and graph on the GPU; kv_k, kv_v,
                           * arena and pool are NULL */
} eng_ctx;

/* Bind every weight slot of desc to the tensor of the same name in g, checking
 * shape.  A weight whose compiled type (desc->weight_types, chosen by the
 * compute precision) equals the file's is bound to the mapping (no copy);
 * otherwise it is converted once into memory of its own: dequantized for CF_F32
 * (kern_dequant_row), repacked with kern_repack for the interleaved types,
 * into one anonymous mapping (transparent huge pages), the tensors spread
 * over up to n_threads_hint threads (<= 0: physical cores).  Weights bound to
 * the mapping that the first forward reads in full are prefaulted
 * (gguf_populate) when they fit in half the RAM.  progress (may be NULL) is
 * called on the calling thread after each tensor it converts, with the
 * source bytes converted so far by all threads and their total.
 * Errors: -1, "tensor 'X': type Q8_0 in the file, compiled for Q4_K". */
int eng_model_bind_threads(eng_model *m, const gguf_file *g, const cf_model_desc *desc,
                           void (*forward)(cf_env *), int n_threads_hint,
                           void (*progress)(void *user, size_t done, size_t total), void *progress_user,
                           char *err, size_t err_len);
/* eng_model_bind_threads with the default thread count. */
int eng_model_bind(eng_model *m, const gguf_file *g, const cf_model_desc *desc,
                   void (*forward)(cf_env *), char *err, size_t err_len);
/* Bind for streaming (stream.h, docs/memory.md): every weight must compute
 * in its file type (native precision, or a .giw), nothing is prefaulted,
 * and a helper thread reads `ahead` layers ahead of the forward pass and
 * drops the others, except the first `keep`.  Errors: -1, "tensor 'X': streaming needs its file
 * type Q8_0, compiled for Q8_0_R8 (use --quant native or a .giw)". */
int eng_model_bind_streamed(eng_model *m, const gguf_file *g, const cf_model_desc *desc,
                            void (*forward)(cf_env *), int ahead, int keep, char *err, size_t err_len);
void eng_model_release(eng_model *m);

/* --device cuda: bind desc's weight slots to g's tensors on the GPU dev:
 * load the compiled module (image, from cc_build), resolve its kernels and
 * upload every weight once in its GGUF layout (runtime/engine/eng_cuda.h).
 * The context made from this model by eng_ctx_new lives on the GPU; eng_eval
 * and eng_logits work the same.  Errors: -1, "cuMemAlloc (...): ...",
 * "tensor 'x': type ... compiled for ...". */
int eng_model_bind_cuda(eng_model *m, const gguf_file *g, const cf_model_desc *desc,
                        void (*forward)(cf_cuda_host *), const cuda_image *image, const cuda_dev *dev,
                        char *err, size_t err_len);

/* n_ctx <= 0: min(desc->n_ctx_train, 4096).  n_threads <= 0: physical cores.
 * logits_all: eng_eval keeps logits for every token (up to one batch) instead
 * of only the last.  act_quant: cf_env.act_quant, the matmul activation mode
 * (0 f32, exact; 1 quantized like llama.cpp, see templates/prelude.h); 1 also
 * reserves the scratch for the converted activations (kern_scratch_bytes_act).
 * All buffers are allocated here, none later.  For a CUDA model (n_threads
 * and act_quant unused) the KV cache and activations are on the GPU. */
int eng_ctx_new(const eng_model *m, int n_ctx, int n_threads, int logits_all, int act_quant,
                eng_ctx **out, char *err, size_t err_len);
void eng_ctx_free(eng_ctx *c);

/* Evaluate n tokens at position c->n_past (in batches of desc->n_batch) and
 * advance n_past.  Afterwards eng_logits() holds the last token's logits
 * (n_vocab floats).  Errors: -1 when the context would overflow (nothing is
 * evaluated) or a token id is out of range; -1 when a batch's logits are not
 * all finite, naming the first op, weight and layer that produced inf/NaN
 * ("... first in layer 3: the output of matmul blk.3.ffn_down.weight"; n_past
 * then stays at the start of that batch).  An encoder (desc->encoder) has
 * no logits (its output goes to env.hidden) and evaluates one input whole:
 * n_past must be 0 (eng_truncate(c, 0) first) and n <= desc->n_batch. */
int eng_eval(eng_ctx *c, const int *tokens, int n, char *err, size_t err_len);
/* Logits of the last evaluated token: (n_vocab). Valid until the next eval. */
const float *eng_logits(const eng_ctx *c);
/* Forget positions >= n_past (KV reuse: keep a shared prefix). */
void eng_truncate(eng_ctx *c, int n_past);

#endif
