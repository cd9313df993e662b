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

/* A saved recurrent state (prefix reuse; see eng_truncate). */
typedef struct {
    int pos;            /* position it was taken at (the state after tokens 0..pos-1); -1: empty */
    int has_logits;     /* logits holds the last token's logits */
    unsigned long stamp;/* when it was taken (eviction order) */
    float *state;       /* (desc->state_floats) */
    float *logits;      /* (n_vocab) */
} eng_snap;

/* Snapshot slots a context keeps by default, and at most. */
#define ENG_DEFAULT_SNAPSHOTS 4
#define ENG_MAX_SNAPSHOTS 64

typedef struct {
    const eng_model *m;
    pool *pool;
    float *arena;   /* (desc->arena_floats) */
    void **kv_k;    /* (n_layer) each n_ctx rows of kv_dim[l] values of kv_type_k
                     * (kern_kv_row_bytes each) */
    void **kv_v;    /* (n_layer) each n_ctx rows of kv_dim_v[l] values of kv_type_v,
                     * NULL where that is 0 */
    void *kv_region; /* one anonymous mapping holding every kv_k[l] and kv_v[l] */
    size_t kv_region_bytes;
    int kv_type_k, kv_type_v; /* ggml types of the cache rows (cf_env.kv_type_k/v) */
    float *logits;  /* (n_logits_cap, n_vocab) */
    int *positions; /* (n_batch) positions of the current batch */
    int n_ctx;      /* positions the KV cache holds */
    int n_past;     /* positions already evaluated */
    int logits_all; /* keep logits of every token of the last eval batch */
    int n_logits;   /* rows valid in logits after the last eval */
    float *state;   /* (state_floats) recurrent state after positions 0..n_past-1; NULL when
                     * the model has no recurrent layer (and on CUDA, which runs none) */
    long state_floats;
    eng_snap *snaps; /* (n_snaps) for prefix reuse (eng_snapshot, eng_truncate) */
    int n_snaps;
    unsigned long snap_clock;
    int snap_deferred; /* 1: the state is the snapshot of n_past, not yet copied (eng_snapshot_deferred) */
    cf_env env;     /* CPU; on CUDA only env.hidden is read (embeddings) */
    const cf_kernels *kern_base; /* the ISA's kernel table; env.K is kern_stream when streaming */
    cf_kernels kern_stream;      /* kern_base with matmul (and matmul_n, weight by weight) reporting its weight to the stream */
    struct ecu_ctx *cuda; /* --device cuda: KV cache, arena and graph on the GPU; kv_k, kv_v,
                           * arena and pool are NULL */
} eng_ctx;

/* Options of eng_ctx_open; zero is the default of each field. */
typedef struct {
    int n_ctx;       /* <= 0: min(desc->n_ctx_train, 4096) */
    int n_threads;   /* <= 0: physical cores */
    int logits_all;  /* keep logits of every token (up to one batch) instead of the last */
    int act_quant;   /* cf_env.act_quant */
    int n_snapshots; /* recurrent models: state snapshots kept (0: ENG_DEFAULT_SNAPSHOTS) */
    int kv_type_k;   /* ggml type of the K cache rows: CF_F32 (0), CF_F16, CF_Q8_0, CF_Q4_0 */
    int kv_type_v;   /* of the V cache rows (MLA layers keep their values in the K rows) */
} eng_ctx_opts;

/* llama.cpp's names of the KV cache types (--cache-type-k): "f32", "f16",
 * "q8_0", "q4_0"; NULL for any other type.  parse: the type of a name
 * (case-insensitive), or -1. */
const char *eng_kv_type_name(int type);
int eng_kv_type_parse(const char *name);
/* Check that a cache of types kv_type_k / kv_type_v fits every layer of d:
 * the quantized types need each layer's row (n_head_kv x head_dim values)
 * to be whole blocks of 32.  Errors: -1, "cache type q8_0: layer 3's K row
 * is 80 values (n_head_kv x head_dim), not a multiple of 32". */
int eng_kv_types_check(const cf_model_desc *d, int kv_type_k, int kv_type_v, char *err, size_t err_len);
/* Bytes of the K and V cache of d at n_ctx positions in those types (0 for
 * a type eng_kv_types_check refuses). */
size_t eng_kv_bytes(const cf_model_desc *d, int n_ctx, int kv_type_k, int kv_type_v);

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
 * drops the others, except the first `keep`; expert tensors are read by
 * routed expert and held by an LRU of moe_cache experts per layer (<= 0:
 * n_expert_used; stream.h).  Errors: -1, "tensor 'X': streaming needs its file
 * type Q8_0, compiled for Q8_0_R8 (use --quant native or a .giw)". */
int eng_model_bind_streamed(eng_model *m, const gguf_file *g, const cf_model_desc *desc,
                            void (*forward)(cf_env *), int ahead, int keep, int moe_cache, char *err,
                            size_t err_len);
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
/* eng_ctx_new with every option (eng_ctx_opts); a model with recurrent
 * layers also gets its state (desc->state_floats) and n_snapshots copies of
 * it with the logits that go with them (snapshots: eng_snapshot).  Errors: -1
 * for out-of-range options or out of memory. */
int eng_ctx_open(const eng_model *m, const eng_ctx_opts *o, eng_ctx **out, char *err,
                 size_t err_len);
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
/* Go back to position n_past (prefix reuse: keep a shared prefix) and return
 * the position actually kept, from which the caller evaluates again.  The KV
 * cache just forgets positions >= n_past, so without recurrent layers that is
 * n_past (or the current n_past when it is not larger).  A recurrent state
 * cannot forget: the context restores the snapshot taken at the largest
 * position <= n_past (with its logits: eng_logits is valid again when the
 * snapshot has them; otherwise it is not) or, without one, the zero state of
 * position 0, and returns that position.  Snapshots past it are dropped. */
int eng_truncate(eng_ctx *c, int n_past);
/* Save the recurrent state (and the last logits when valid) as the snapshot
 * of position n_past, replacing one taken there before; when the slots are
 * full, the oldest snapshot but the earliest one goes.  No-op without
 * recurrent layers or at position 0.  Never allocates. */
void eng_snapshot(eng_ctx *c);
/* eng_snapshot, deferred: the current state is the snapshot of n_past, and
 * is copied only if eng_eval of more than one token (or eng_snapshot_flush)
 * comes next.  eng_eval of one token drops it instead, and eng_truncate
 * below n_past drops it as it drops every snapshot past the kept position:
 * a decode loop of one-token evaluations (each the end of an evaluated
 * prompt) copies no state per token, and its last position is saved when a
 * longer evaluation extends it.  No-op like eng_snapshot. */
void eng_snapshot_deferred(eng_ctx *c);
/* Copy a deferred snapshot now (no-op without one). */
void eng_snapshot_flush(eng_ctx *c);
/* 1 when a snapshot of position pos exists (a deferred one included). */
int eng_snapshot_at(const eng_ctx *c, int pos);
/* The caller wrote the KV rows [0, n_past), the recurrent state and, when
 * has_logits, the last logits row (logits[0..n_vocab)) directly (a session
 * file): adopt them as the history, drop the old snapshots and take one here. */
void eng_set_history(eng_ctx *c, int n_past, int has_logits);

#endif
