/*
 * stream.h — streaming weights (`--stream-weights`, docs/memory.md): run a
 * model whose weights do not fit in memory from the file mapping, a layer
 * at a time.  The weights bound to the mapping are grouped by layer
 * ("blk.N." tensors; the rest — embeddings, output, final norm — form one
 * group that stays resident).  The forward pass reports each matmul's
 * weight pointer (stream_touch, from the engine's kernel-table wrapper);
 * when it enters layer L, a helper thread maps layers L+1..L+ahead in
 * (madvise MADV_POPULATE_READ: the reads happen on the helper, so the
 * compute threads find the pages mapped) and drops every other layer from
 * the process (MADV_DONTNEED: out of RSS; the page cache keeps them until
 * the kernel needs the memory, and a memory limit makes it reclaim them).
 *
 * Mixture-of-experts layers: the expert tensors ("blk.N.*_exps.weight",
 * [n_in, n_out, n_expert], one matrix per expert) are not part of the
 * layer window.  The forward pass reports each expert matmul's routed
 * experts (stream_experts); only their slices are read (MADV_POPULATE_READ
 * on the compute thread, just before the matmul) and an LRU per layer keeps
 * the moe_cache most recently routed experts of each layer mapped: leaving
 * a layer drops its least recently routed experts beyond that.  An
 * expert's slices need not be page-aligned: a page shared by two experts
 * is dropped only when every expert on it is out, and the pages a fault
 * maps around a read expert are swept when the layer is left.
 *
 * One eng_stream per bound model; its state is the only thing about a
 * bound model that changes while sessions run, guarded by its own lock.
 */
#ifndef CINFER_STREAM_H
#define CINFER_STREAM_H

#include <stdint.h>

#include "formats/gguf.h"
#include "prelude.h"

typedef struct eng_stream eng_stream;

typedef struct {
    uint64_t populated_bytes; /* bytes the helper mapped in ahead of use */
    uint64_t dropped_bytes;   /* bytes it dropped behind */
    uint64_t layer_bytes_max; /* the largest layer's mapped weights */
    uint64_t global_bytes;    /* weights outside any layer, always resident */
    int n_layers;             /* layer groups */
    int ahead;
    int keep;                 /* layers 0..keep-1 stay resident once read */
    /* mixture of experts (all 0 without expert tensors) */
    int n_expert;             /* experts per MoE layer (the largest) */
    int moe_cache;            /* experts of each layer kept mapped (the LRU's size) */
    uint64_t expert_bytes;    /* one expert's slices in one layer (the largest) */
    uint64_t expert_hits;     /* routed (layer, expert)s found mapped, once per layer visit */
    uint64_t expert_misses;   /* routed ones read in */
    uint64_t expert_evictions;/* dropped by the LRU */
    uint64_t expert_resident_bytes; /* slices mapped now (of whole experts) */
} stream_stats;

/* Group the weights of W (desc's slots; those inside g's mapping) by layer
 * and start the helper thread; ahead >= 1 layers are read ahead; the first
 * keep layers are never dropped (a budget with room for them: they are not
 * read again every token) — their expert tensors excepted, which the LRU
 * holds to moe_cache experts per layer (<= 0: the experts one step routes,
 * n_expert_used, learnt from the first expert matmul; above n_expert:
 * every expert once routed).
 * Errors: -1, "stream: cannot start the read-ahead thread". */
int stream_new(const gguf_file *g, const cf_model_desc *desc, const void *const *W, int ahead, int keep,
               int moe_cache, eng_stream **out, char *err, size_t err_len);
/* Stop the helper and free.  stream_free(NULL) is a no-op. */
void stream_free(eng_stream *s);
/* The forward pass is about to read weight data at w: on entering another
 * layer, tell the helper.  Called from one thread at a time (the thread
 * running cf_forward); no allocation, a lock only on a layer change. */
void stream_touch(eng_stream *s, const void *w);
/* An expert matmul is about to read, of the expert tensor at w, the
 * matrices of experts[0..n-1] (distinct, each < the tensor's n_expert):
 * stream_touch(w), then map in those of them the layer's LRU does not hold
 * (all of the layer's expert tensors at once) and mark them used.  Same
 * thread rule as stream_touch; no allocation.  w outside every expert
 * tensor: only stream_touch. */
void stream_experts(eng_stream *s, const void *w, const int *experts, int n, int n_expert_used);
void stream_get_stats(eng_stream *s, stream_stats *out);

/* Bytes of desc's weights over g by layer, for plans: *layer_max the
 * largest layer, *layer_total all layers, *global those outside layers —
 * expert tensors not included in any of them (stream_expert_bytes). */
void stream_layer_bytes(const gguf_file *g, const cf_model_desc *desc, uint64_t *layer_max,
                        uint64_t *layer_total, uint64_t *global);
/* The expert tensors of desc over g: *per_expert the largest one expert's
 * slices in one layer take, *n_expert the most experts a layer has,
 * *n_moe_layers the layers with experts, *total all their bytes (0s: none). */
void stream_expert_bytes(const gguf_file *g, const cf_model_desc *desc, uint64_t *per_expert, int *n_expert,
                         int *n_moe_layers, uint64_t *total);

#endif
