/*
 * prelude_cuda.h — the ABI between the cinfer runtime and a generated CUDA
 * forward pass (templates/forward.cu.in).  The emitter pastes it, after
 * prelude.h, into every generated .cu file; the runtime includes it.
 *
 * A generated .cu file has two halves that see this header differently:
 *   - the device half (#if defined(__CUDACC__)): __global__ kernels with
 *     every dimension, eps and scale baked in, compiled by NVRTC at load.
 *     Ops whose kernels are the same text (every layer's q projection, say)
 *     share them: a kernel is named by a hash of its text (cf_mv_<hash>), so
 *     a model has tens of kernels however deep it is.  Each reads the
 *     context's cf_cuda_env and its op's buffers (cf_cuda_args);
 *   - the host half (#if !defined(__CUDACC_RTC__)): the model description
 *     and cf_cuda_forward, a straight line of launch requests through
 *     cf_cuda_ops, compiled by libtcc like the C forward pass.  The runtime
 *     (runtime/engine/eng_cuda.c) turns each request into grid and block
 *     sizes (runtime/kernels/cuda/cfk_geom.h) and a kernel launch, or a node
 *     of the decode step's CUDA graph.
 * clang's CUDA front end (make test) sees both halves.  Same rules as
 * prelude.h: no headers, C that is also C++.
 */
#ifndef CINFER_PRELUDE_CUDA_H
#define CINFER_PRELUDE_CUDA_H

#define CF_CUDA_ABI_VERSION 2

/* What every kernel reads: one struct in device memory, at the same address
 * for the life of a context (so the decode graph, captured once, stays
 * valid); the runtime rewrites pos, n_tokens and the tokens before each
 * step.  Pointers are device addresses; the layout is the same on the host
 * (x86-64/aarch64 C) and the device (64-bit): 8 pointers, then 6 ints. */
typedef struct cf_cuda_env {
    const void *const *W; /* (n_weights) weight data in its GGUF layout, by slot */
    float *arena;         /* activations: cf_model_desc.arena_floats floats */
    float *const *kv_k;   /* (n_layer) each (n_ctx, kv_dim(layer)) f32 */
    float *const *kv_v;   /* (n_layer) each (n_ctx, kv_dim(layer)) f32 */
    float *logits;        /* (n_logit_rows, n_vocab) */
    float *hidden;        /* (n_batch, n_embd): final hidden states when asked (embeddings) */
    float *scratch;       /* decode attention partials: (n_head, att_splits, head_dim + 2) */
    const int *tokens;    /* (n_batch) input ids of this step */
    int n_ctx;            /* KV cache capacity in positions */
    int att_splits;       /* ceil(n_ctx / CFK_ATT_SPLIT) */
    int pos;              /* position of tokens[0] */
    int n_tokens;         /* 1..n_batch */
    int logits_all;       /* 0: logits of the last token only */
    int reserved;         /* 0 */
} cf_cuda_env;

/* What a kernel is told about its op, by value at launch (and so frozen in
 * a captured graph): the arena buffers and weights the op reads and writes.
 * Device addresses; same layout on both sides (6 pointers, 2 ints). */
typedef struct cf_cuda_args {
    float *out;          /* the op's output in the arena (NULL for logits/hidden: E's own) */
    const float *in[3];  /* its inputs in the arena, NULL when unused */
    const void *w;       /* its weight, GGUF layout */
    const void *w2;      /* a second weight (layer_norm's bias), or NULL */
    int layer;           /* attention: the KV cache layer */
    int reserved;        /* 0 */
} cf_cuda_args;

/* Host half: launch requests.  Each names the kernels the op may use (by
 * the string of their name; the runtime resolves them once at load) and its
 * buffers: arena offsets in floats (-1: none) and weight slots (-1: none);
 * T is the tokens of this call.  The runtime picks the variant (decode or
 * prompt) and the geometry (runtime/kernels/cuda/cfk_geom.h). */
typedef struct cf_cuda_host cf_cuda_host;
typedef struct cf_cuda_ops {
    /* embed, pos_embed: rows of n elements, one block per token */
    void (*get_rows)(cf_cuda_host *H, int k, const char *kern, long out, int w, int n, int T);
    /* n_groups rows of n per token (rms_norm over groups) */
    void (*rms_norm)(cf_cuda_host *H, int k, const char *kern, long out, long in, int w, int n_groups, int n,
                     int T);
    void (*layer_norm)(cf_cuda_host *H, int k, const char *kern, long out, long in, int w, int w2, int n, int T);
    /* (T, n_out) = (T, n_in) . W^T, W of ggml type `type`: kernel mv (up to
     * CFK_MV_MAX_T tokens) or mm (tiled, tensor cores) */
    void (*matmul)(cf_cuda_host *H, int k, const char *mv, const char *mm, long out, long in, int w, int type,
                   int n_out, int n_in, int T);
    /* n elements per token, one thread each; in1 and w as the op has them */
    void (*elementwise)(cf_cuda_host *H, int k, const char *kern, long out, long in0, long in1, int w, int n, int T);
    void (*rope)(cf_cuda_host *H, int k, const char *kern, long x, int w, int n_head, int n_rot, int T); /* w: freq factors */
    /* kv stores k, v into the layer's cache; then dec + cmb (T == 1: split-K
     * over the cache, merged) or pf (prompts, flash-style) */
    void (*attention)(cf_cuda_host *H, int k, const char *kv, const char *dec, const char *cmb, const char *pf,
                      long out, long q, long kk, long v, int layer, int n_head, int n_head_kv, int head_dim, int T);
    /* hid when hidden states are asked for; last (the last token, matvec) or
     * mv/mm (every token, with logits_all); post when post (a bias, a logit
     * scale or soft-cap) is set; bias: the bias's weight slot or -1 */
    void (*logits)(cf_cuda_host *H, int k, const char *hid, const char *last, const char *mv, const char *mm,
                   const char *post_kern, long in, int w, int bias, int type, int n_vocab, int n_in, int post,
                   int T);
} cf_cuda_ops;

struct cf_cuda_host {
    const cf_cuda_ops *ops;
    void *plan;    /* the runtime's; opaque here */
    int n_tokens;  /* T of this call */
};

#endif
