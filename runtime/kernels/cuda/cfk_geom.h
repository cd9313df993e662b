/*
 * cfk_geom.h — the launch geometry of the CUDA kernels, shared by the device
 * side (cf_cuda.cuh, compiled by NVRTC at load) and the host planner that
 * launches them (runtime/engine/eng_cuda.c).  Plain #defines so that C (the
 * planner, tests) and CUDA C++ (the kernels) read the same numbers: a kernel
 * that indexes with blockIdx/threadIdx and a planner that sizes the grid
 * from these constants cannot disagree.
 */
#ifndef CFK_GEOM_H
#define CFK_GEOM_H

#define CFK_WARP 32

/* matvec (decode): one warp per output row, CFK_MV_ROWS rows per block,
 * grid.x = ceil(n_out / CFK_MV_ROWS); serves up to CFK_MV_MAX_T tokens per
 * call (each row's weights are read once for all of them). */
#define CFK_MV_ROWS 4
#define CFK_MV_THREADS (CFK_MV_ROWS * CFK_WARP)
#define CFK_MV_MAX_T 4

/* tiled matmul (prompt batches, tensor cores on sm_80+): CFK_MM_BM tokens x
 * CFK_MM_BN output rows per block, K in steps of CFK_MM_BK (one 32-element
 * unit of every weight type); 4 warps of 32x32 each.
 * grid = (ceil(n_out / CFK_MM_BN), ceil(n_tokens / CFK_MM_BM)). */
#define CFK_MM_BM 64
#define CFK_MM_BN 64
#define CFK_MM_BK 32
#define CFK_MM_THREADS 128

/* one block per row (rms_norm, layer_norm), and elementwise ops
 * (grid = ceil(n_elems / CFK_EW_THREADS)); get_rows: one block per token. */
#define CFK_ROW_THREADS 256
#define CFK_EW_THREADS 256

/* rope: grid (n_tokens, n_head), one thread per rotated pair. */
#define CFK_ROPE_THREADS(n_rot) ((n_rot) / 2)
#define CFK_ROPE_MAX_PAIRS 512

/* attention.  Decode (one token): split-K over the cache, grid (n_head,
 * n_splits) with n_splits = ceil(n_ctx / CFK_ATT_SPLIT) fixed per context
 * (so a captured graph serves every position; splits past the current one
 * return at once), then one combine block per head.  Prompts: flash-style,
 * CFK_ATT_Q queries (one warp each) of one head per block, keys in shared
 * memory tiles of CFK_ATT_KT(head_dim), online softmax.
 * grid (n_head, ceil(n_tokens / CFK_ATT_Q)). */
#define CFK_ATT_SPLIT 256
#define CFK_ATT_THREADS 128
#define CFK_ATT_COMBINE_THREADS(hd) (((hd) + CFK_WARP - 1) / CFK_WARP * CFK_WARP)
#define CFK_ATT_Q 4
#define CFK_ATT_PF_THREADS (CFK_ATT_Q * CFK_WARP)
#define CFK_ATT_KT(hd) ((hd) <= 128 ? 32 : 16)
#define CFK_ATT_MAX_HD 256
/* floats of split partials per (head, split): max, sum, out[head_dim] */
#define CFK_ATT_PARTIAL(hd) ((hd) + 2)

#endif
