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
} stream_stats;

/* Group the weights of W (desc's slots; those inside g's mapping) by layer
 * and start the helper thread; ahead >= 1 layers are read ahead; the first
 * keep layers are never dropped (a budget with room for them: they are not
 * read again every token).
 * Errors: -1, "stream: cannot start the read-ahead thread". */
int stream_new(const gguf_file *g, const cf_model_desc *desc, const void *const *W, int ahead, int keep,
               eng_stream **out, char *err, size_t err_len);
/* Stop the helper and free.  stream_free(NULL) is a no-op. */
void stream_free(eng_stream *s);
/* The forward pass is about to read weight data at w: on entering another
 * layer, tell the helper.  Called from one thread at a time (the thread
 * running cf_forward); no allocation, a lock only on a layer change. */
void stream_touch(eng_stream *s, const void *w);
void stream_get_stats(eng_stream *s, stream_stats *out);

/* Bytes of desc's weights over g by layer, for plans: *layer_max the
 * largest layer, *layer_total all layers, *global those outside layers. */
void stream_layer_bytes(const gguf_file *g, const cf_model_desc *desc, uint64_t *layer_max,
                        uint64_t *layer_total, uint64_t *global);

#endif
