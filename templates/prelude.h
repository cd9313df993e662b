/*
 * prelude.h — the ABI between the cinfer runtime and every generated forward
 * pass.  The emitter pastes this file verbatim at the top of each generated
 * translation unit, and the runtime includes it, so both sides agree on one
 * definition.
 *
 * Rules (design notes §1, ../shared/DESIGN.md, outside this repo): no libc
 * or system headers here — libtcc compiles the generated code without include
 * paths — and no arithmetic loops: generated
 * code only orchestrates calls into runtime kernels (gcc -O3, SIMD), passing
 * every dimension as a compile-time constant.  Anything added here must build
 * under tcc and under gcc/clang with -Wall -Wextra -Werror.
 */
#ifndef CINFER_PRELUDE_H
#define CINFER_PRELUDE_H

#define CF_ABI_VERSION 8

/* ggml type ids as used in calls (same values as enum ggml_type in gguf.h). */
#define CF_F32 0
#define CF_F16 1
#define CF_Q4_0 2
#define CF_Q8_0 8
#define CF_IQ4_NL 20
#define CF_Q4_1 3
#define CF_Q5_0 6
#define CF_Q5_1 7
#define CF_BF16 30
#define CF_MXFP4 39
/* cinfer's own repacked weight types (compute precisions; layouts in
 * runtime/kernels/kern.h): groups of 8 rows interleaved for SIMD.  Not ggml types:
 * only .giw files (cinfer.* keys) store them. */
#define CF_Q4_0_R8 100
#define CF_Q8_0_R8 101

/* RoPE layouts: "norm" rotates adjacent pairs (x[2i], x[2i+1]) — llama;
 * "neox" rotates (x[i], x[i + n_rot/2]) — GPT-NeoX, qwen2, phi3, gemma. */
#define CF_ROPE_NORM 0
#define CF_ROPE_NEOX 2

/* Expert routing functions (moe_route; llama.cpp's llama_expert_gating_func_type):
 * SOFTMAX: softmax over all experts, weights are the chosen probabilities;
 * SIGMOID: per-expert sigmoid (DeepSeek-V3, GLM-4.5);
 * SOFTMAX_WEIGHT: choose on the raw logits, weights = softmax over the chosen k (gpt-oss). */
#define CF_GATING_SOFTMAX 1
#define CF_GATING_SIGMOID 2
#define CF_GATING_SOFTMAX_WEIGHT 3

/* attention's `window` below CF_ATT_BIDIRECTIONAL: no causal mask (encoders). */
#define CF_ATT_BIDIRECTIONAL (-1)
/* Activation after a causal conv (ssm_conv): none, or silu(x) = x / (1 + e^-x). */
#define CF_ACT_NONE 0
#define CF_ACT_SILU 1

typedef struct cf_env cf_env;

/* Kernel table.  Shapes are row-major with the token index outermost:
 * an activation "(n_tokens, n)" is n_tokens rows of n floats; n_tokens is an
 * explicit argument (the last-token logits path passes 1).  Token t sits at
 * position E->pos + t.  Kernels may use E->pool for threads and never
 * allocate. */
typedef struct cf_kernels {
    /* y (n_tokens, n_out) = x (n_tokens, n_in) · Wᵀ; w holds n_out rows of
     * n_in elements of ggml type `type`. */
    void (*matmul)(cf_env *E, float *y, const float *x, const void *w, int type,
                   int n_out, int n_in, int n_tokens);
    /* y (n_tokens, n) = rows ids[t] of w (rows of n elements of `type`), as f32. */
    void (*get_rows)(cf_env *E, float *y, const void *w, int type, int n, const int *ids,
                     int n_tokens);
    /* y (n_tokens, n) = x / sqrt(mean(x²) + eps) * w; w (n) f32, or NULL: no weight. */
    void (*rms_norm)(cf_env *E, float *y, const float *x, const float *w, int n, float eps,
                     int n_tokens);
    /* In place on x (n_tokens, n_head * head_dim): rotate the first n_rot dims
     * of each head by angle pos * freq_base^(-2i/n_rot), layout `mode`.  YaRN
     * (ggml_rope_ext): angle θ becomes freq_scale·θ blended back toward θ by
     * ext_factor over the dims of the ramp that beta_fast, beta_slow and
     * n_ctx_orig define, and cos/sin are multiplied by attn_factor (times
     * 1 + 0.1·ln(1/freq_scale) when ext_factor != 0).  Plain RoPE is
     * freq_scale 1, ext_factor 0, attn_factor 1.  freq_factors (n_rot / 2)
     * or NULL: pair i's θ is first divided by freq_factors[i] (ggml_rope_ext's
     * c tensor: Llama 3.1 rope_freqs, Gemma 4's proportional RoPE). */
    void (*rope)(cf_env *E, float *x, int n_head, int head_dim, int n_rot, float freq_base,
                 int mode, float freq_scale, float ext_factor, float attn_factor,
                 float beta_fast, float beta_slow, int n_ctx_orig, const float *freq_factors,
                 int n_tokens);
    /* Causal multi-head attention with GQA over the KV cache of `layer`:
     * store k (n_tokens, n_head_kv * head_dim) and v (n_tokens, n_head_kv *
     * head_dim_v) at positions pos..pos+n_tokens-1, then out (n_tokens, n_head
     * * head_dim_v) = softmax(q kᵀ * scale) v over positions 0..pos+t; q is
     * (n_tokens, n_head * head_dim).  Query head h reads kv head
     * h / (n_head / n_head_kv).  v == NULL, k not: each head's values are the first
     * head_dim_v floats of its key rows and nothing goes to the V cache (MLA
     * with absorbed matrices: keys [latent | rope part], values the latent).
     * window > 0: a query at position p sees only keys p-window+1..p (sliding
     * window); window CF_ATT_BIDIRECTIONAL: every query sees every key at
     * positions 0..pos+n_tokens-1, its own batch's later ones too (encoders,
     * which evaluate their whole input in one call at pos 0).  softcap > 0:
     * scores become softcap·tanh(score/softcap) before the softmax (Gemma 2).
     * sinks (n_head) or NULL: one extra logit per head that joins the
     * softmax's max and denominator but has no value (gpt-oss).
     * k == v == NULL: nothing is stored and the queries read the cache of
     * `layer` as an earlier layer of the same call filled it (Gemma 3n/4
     * layers that share another layer's KV). */
    void (*attention)(cf_env *E, float *out, const float *q, const float *k, const float *v,
                      const float *sinks, int layer, int n_head, int n_head_kv, int head_dim,
                      int head_dim_v, float scale, int window, float softcap, int n_tokens);
    /* y (n_tokens, n) = silu(gate) * up. */
    void (*swiglu)(cf_env *E, float *y, const float *gate, const float *up, int n,
                   int n_tokens);
    /* y = a + b, all (n_tokens, n); y may alias a or b. */
    void (*add)(cf_env *E, float *y, const float *a, const float *b, int n, int n_tokens);
    /* y (n) = row n_tokens - 1 of x (n_tokens, n). */
    void (*last_row)(cf_env *E, float *y, const float *x, int n, int n_tokens);
    /* y = x + b per row, b (n) f32 (biases; or one row of an F32 matrix: BERT's
     * token-type embedding).  y may alias x. */
    void (*add_row)(cf_env *E, float *y, const float *x, const float *b, int n, int n_tokens);
    /* y = x * s.  y may alias x. */
    void (*scale)(cf_env *E, float *y, const float *x, float s, int n, int n_tokens);
    /* y = gelu(x) (tanh form, ggml's F16 table).  y may alias x. */
    void (*gelu)(cf_env *E, float *y, const float *x, int n, int n_tokens);
    /* y = gelu(g) * u. */
    void (*geglu)(cf_env *E, float *y, const float *g, const float *u, int n, int n_tokens);
    /* LayerNorm: y = (x - mean) / sqrt(var + eps) * w + b; b may be null. */
    void (*layer_norm)(cf_env *E, float *y, const float *x, const float *w, const float *b,
                       int n, float eps, int n_tokens);
    /* y (n_tokens, n_y) = columns [col0, col0 + n_y) of x (n_tokens, n_x). */
    void (*copy_cols)(cf_env *E, float *y, const float *x, int n_x, int col0, int n_y,
                      int n_tokens);
    /* In place on logits (n_rows, n_vocab): += bias (n_vocab) when not NULL (phi2's
     * output.bias), then *= scale, then c·tanh(l/c) if softcap c > 0. */
    void (*logits_post)(cf_env *E, float *logits, const float *bias, int n_vocab, int n_rows,
                        float scale, float softcap);

    /* ---- products and activations (issue-19 families) ------------------------
     * mul_row: y = x * w per row, w (n) f32, or n_w == 1: times w[0] (scalar
     * weights).  mul: y = a * b elementwise.  relu_sqr: y = max(x, 0)².
     * xielu: Apertus's xIELU from the GGUF's raw alpha_n, alpha_p, beta, eps
     * (runtime/kernels/kern_elem.h has the formula).  All (n_tokens, n); y
     * may alias the first input. */
    void (*mul_row)(cf_env *E, float *y, const float *x, const float *w, int n_w, int n,
                    int n_tokens);
    void (*mul)(cf_env *E, float *y, const float *a, const float *b, int n, int n_tokens);
    void (*relu_sqr)(cf_env *E, float *y, const float *x, int n, int n_tokens);
    void (*xielu)(cf_env *E, float *y, const float *x, float alpha_n, float alpha_p, float beta,
                  float eps, int n, int n_tokens);
    /* y = x * (1 + scale · ln(1 + floor((pos + offset) / floor_scale))) per
     * token row at position pos (llama.cpp's attention temperature tuning:
     * Llama 4, Ministral 3).  y may alias x. */
    void (*pos_log_scale)(cf_env *E, float *y, const float *x, float scale, int floor_scale,
                          float offset, int n, int n_tokens);
    /* y = tanh(x); y = a - b; y (n_tokens, n_a + n_b) = [a | b] per row. */
    void (*tanh_)(cf_env *E, float *y, const float *x, int n, int n_tokens);
    void (*sub)(cf_env *E, float *y, const float *a, const float *b, int n, int n_tokens);
    void (*concat)(cf_env *E, float *y, const float *a, int n_a, const float *b, int n_b,
                   int n_tokens);

    /* ---- groups of a row (Gemma 3n's AltUp streams) -------------------------
     * A row of n_group * n floats holds n_group groups of n; |v| is the
     * magnitude sqrt(Σ v²).  match_norm: y_g = x_g · |ref| / |x_g|, ref
     * (n_tokens, n).  mix_groups: y_j = Σ_k c[j n_group + k] x_k, c (n_tokens,
     * n_group²), y does not alias x.  axpy_groups: y_j = v (c_j + bias) + p_j,
     * v (n_tokens, n), c (n_tokens, n_group).  add_groups: y_g = x_g + v for
     * g >= g0.  gaussian_topk: per row of n, max(x - (mean + std_mul · std), 0)
     * (Gemma 3n's activation sparsity).  runtime/kernels/kern_elem.h has the
     * roundings. */
    void (*match_norm)(cf_env *E, float *y, const float *x, const float *ref, int n, int n_group,
                       int n_tokens);
    void (*mix_groups)(cf_env *E, float *y, const float *x, const float *c, int n, int n_group,
                       int n_tokens);
    void (*axpy_groups)(cf_env *E, float *y, const float *p, const float *v, const float *c,
                        float bias, int n, int n_group, int n_tokens);
    void (*add_groups)(cf_env *E, float *y, const float *x, const float *v, int n, int n_group,
                       int g0, int n_tokens);
    void (*gaussian_topk)(cf_env *E, float *y, const float *x, float std_mul, int n, int n_tokens);

    /* ---- mixture of experts -------------------------------------------------
     * A route (n_tokens, 2k) holds per token the k chosen experts: k weights
     * (f32) and then k expert ids (int32 bits in float slots), slot 0 the best
     * selection score.  moe_route: from router logits (n_tokens, n_expert),
     * probabilities p by `gating` (CF_GATING_*); selection scores p + bias
     * (bias (n_expert) or NULL: DeepSeek-V3's exp_probs_b, selection only);
     * n_group > 1: only experts of the n_group_used groups (n_expert /
     * n_group consecutive experts each) with the largest sums of their two
     * best scores compete; the top k scores win; weights = p of the winners
     * (SOFTMAX_WEIGHT: softmax over the winners' logits), / their sum when
     * norm, * scale when scale is neither 0 nor 1 (llama.cpp build_moe_ffn). */
    void (*moe_route)(cf_env *E, float *route, const float *logits, const float *bias,
                      int n_expert, int k, int gating, int norm, float scale, int n_group,
                      int n_group_used, int n_tokens);
    /* y (n_tokens, k * n_out): slot j of token t = W_e · x_t (+ bias_e) with
     * e = the slot's expert.  w holds n_expert matrices of n_out rows of n_in
     * elements of `type` one after the other (a 3-D GGUF tensor); bias
     * (n_expert, n_out) or NULL.  x is (n_tokens, n_in) shared by the slots,
     * or (n_tokens, k * n_in) one row per slot when x_per_slot.  Only the
     * chosen experts' rows are read: per token for one token, grouped by
     * expert for more (each expert's matrix streamed once per call).
     * scratch: n_tokens * k * (n_in + n_out + 1) floats, and at least
     * 2 * k * n_in + 64 (the emitter sizes it: kern_moe_scratch_floats). */
    void (*moe_matmul)(cf_env *E, float *y, const float *x, const float *route, const void *w,
                       int type, int n_out, int n_in, int n_expert, int k, int x_per_slot,
                       const float *bias, float *scratch, int n_tokens);
    /* y (n_tokens, n) = Σ_j weight_j · x_j over the k slots of x (n_tokens,
     * k * n), in slot order.  expert_scale (n_expert) or NULL: slot j is
     * first multiplied by expert_scale[its expert] (Gemma 4's
     * ffn_down_exps.scale; ggml rounds (x_j · s) · weight_j). */
    void (*moe_sum)(cf_env *E, float *y, const float *x, const float *route,
                    const float *expert_scale, int n, int k, int n_tokens);
    /* y = x * sigmoid(g): g (n_tokens, n_g) with n_g = n (elementwise) or 1
     * (one gate per token).  y may alias x. */
    void (*mul_sigmoid)(cf_env *E, float *y, const float *x, const float *g, int n, int n_g,
                        int n_tokens);
    /* gpt-oss's clamped SwiGLU (ggml_swiglu_oai): with g' = min(g, limit),
     * u' = clamp(u, -limit, limit): y = g' / (1 + exp(-alpha g')) * (u' + 1). */
    void (*swiglu_oai)(cf_env *E, float *y, const float *g, const float *u, float alpha,
                       float limit, int n, int n_tokens);

    /* ---- per-head layouts (multi-head latent attention) ------------------------
     * head_copy: for each token t and head h < n_head, the n floats at
     * x + t * x_stride + h * x_head go to y + t * y_stride + h * y_head
     * (x_head 0: every head copies the same floats).  The generated code
     * passes column offsets as pointer offsets; y and x do not overlap. */
    void (*head_copy)(cf_env *E, float *y, int y_stride, int y_head, const float *x, int x_stride,
                      int x_head, int n, int n_head, int n_tokens);
    /* Per-head matmul: for each head h, y_h (n_out) = W_h x_h, x_h = the n_in
     * floats of head h of x (n_tokens, n_head * n_in), y (n_tokens, n_head *
     * n_out).  W_h is rows [h * head_rows + row0, +n_out) of w (rows of n_in
     * elements of `type`); transposed: y_h[c] = Σ_i x_h[i] · w[h * head_rows +
     * row0 + i][c] (rows of n_out elements), the absorbed-MLA product with a
     * combined kv_b matrix.  With E->act_quant (not transposed) each head's
     * x_h is converted to the weight's vec_dot_type first, as ggml's batched
     * mul_mat does, into scratch (n_tokens * n_head * n_in floats). */
    void (*head_matmul)(cf_env *E, float *y, const float *x, const void *w, int type, int n_out,
                        int n_in, int n_head, int head_rows, int row0, int transposed,
                        float *scratch, int n_tokens);

    /* ---- recurrent layers (state-space models, linear attention) -------------
     * Their memory is E->state (cf_model_desc.state_floats, all zero before
     * position 0); `state` points at the op's own part of it, laid out as
     * documented per op.  A call over n_tokens tokens leaves the state its last
     * token produced, so a batch and the same tokens one call each give the
     * same state.  Formulas: llama.cpp's ggml_ssm_conv, ggml_ssm_scan and
     * ggml_gated_delta_net (ggml-cpu/ops.cpp); the papers are Mamba (Gu & Dao
     * 2023), Mamba-2 / SSD (Dao & Gu 2024), Gated DeltaNet (Yang et al. 2024). */
    /* Causal depthwise conv1d over the n channels of x (n_tokens, n): with the
     * window r = [state; x] (state: the d_conv - 1 previous input rows of n,
     * oldest first), y[t][c] = Σ_i w[c * d_conv + i] · r[t + i][c] (+ b[c];
     * b may be NULL), then silu when act is CF_ACT_SILU; the state becomes the
     * last d_conv - 1 rows of r.  w: n rows of d_conv taps, oldest first (GGUF
     * ssm_conv1d.weight / shortconv.conv.weight).  y must not alias x. */
    void (*ssm_conv)(cf_env *E, float *y, const float *x, const float *w, const float *b,
                     float *state, int n, int d_conv, int act, int n_tokens);
    /* Selective scan.  x (n_tokens, n_head * head_dim); dt (n_tokens, n_head)
     * raw (+ dt_bias (n_head) when not NULL, then softplus); bc (n_tokens,
     * 2 * n_group * d_state) = [B | C], each n_group rows of d_state; head h
     * reads group h / (n_head / n_group).  state (n_head, head_dim, d_state).
     * Per token: Δ = softplus(dt[h]); S[h][p][s] = S·exp(Δ·A) + B[s]·Δ·x[h][p];
     * y[h][p] = Σ_s S[h][p][s]·C[s] (+ D[h]·x[h][p] when D is not NULL).
     * a_per_state 0 (Mamba-2 SSD): A (n_head), one decay per head;
     * 1 (Mamba-1, head_dim 1, n_head = d_inner): A (n_head, d_state). */
    void (*ssm_scan)(cf_env *E, float *y, const float *x, const float *dt, const float *bc,
                     const float *A, const float *D, const float *dt_bias, float *state,
                     int n_head, int head_dim, int d_state, int n_group, int a_per_state,
                     int n_tokens);
    /* Gated delta rule (Qwen3-Next linear attention).  qkv (n_tokens,
     * 2 * n_k_head * d_k + n_v_head * d_v) = [q heads | k heads | v heads]
     * after the short conv; ba (n_tokens, 2 * n_v_head) as qwen3next's
     * ssm_ba writes it: per k head, r = n_v_head / n_k_head beta logits then r
     * alpha logits.  v head h reads k head h / r.  q, k are L2-normalised per
     * head (x / sqrt(Σx² + eps)), q scaled by 1/sqrt(d_k); β = sigmoid(b),
     * g = softplus(a + dt_bias[h]) · A[h]; state (n_v_head, d_k, d_v), one
     * d_k x d_v matrix S per value head: per token S = e^g S; u = β (v − Sᵀk);
     * S += k uᵀ; o = Sᵀ q.
     * o (n_tokens, n_v_head * d_v).  Batches of more than a few tokens run
     * the chunked (WY) form of the same recurrence (float rounding apart,
     * the same numbers).  scratch: kern_delta_net_scratch_floats(n_v_head,
     * d_k, d_v) floats (runtime/kernels/kern_ssm.h; the emitter reserves them). */
    void (*delta_net)(cf_env *E, float *o, const float *qkv, const float *ba, const float *A,
                      const float *dt_bias, float *state, int n_k_head, int n_v_head, int d_k,
                      int d_v, float eps, float *scratch, int n_tokens);
    /* RMSNorm of each group of `group` values of x (n_tokens, n_group * group)
     * with that group's own weights: y = x / sqrt(mean(x²) + eps) * w,
     * w (n_group * group) (Mamba-2's grouped ssm_norm). */
    void (*rms_norm_groups)(cf_env *E, float *y, const float *x, const float *w, int group,
                            int n_group, float eps, int n_tokens);
    /* n_w matmuls of one input (q, k and v of a layer; gate and up): for
     * each i, y[i] (n_tokens, n_out[i]) = x (n_tokens, n_in) · w[i]ᵀ, w[i]
     * of ggml type type[i] — the same numbers as n_w matmul calls, run as
     * one job (the activations converted for all, one thread-pool run).  The
     * y[i] overlap neither x nor each other; 1 <= n_w <= CF_MATMUL_N_MAX. */
    void (*matmul_n)(cf_env *E, int n_w, float *const *y, const float *x, const void *const *w,
                     const int *type, const int *n_out, int n_in, int n_tokens);
} cf_kernels;

/* Most weights one cf_kernels.matmul_n call takes. */
#define CF_MATMUL_N_MAX 8

/* Everything one forward call sees.  Filled by the runtime. */
struct cf_env {
    const cf_kernels *K;
    const void *const *W; /* (n_weights) tensor data, by weight slot */
    float *arena;         /* activations; cf_model_desc.arena_floats floats */
    void *const *kv_k;    /* (n_layer) each n_ctx rows of kv_dim(layer) values of type
                           * kv_type_k: ggml rows (kern_row_bytes(kv_type_k, kv_dim) bytes) */
    void *const *kv_v;    /* (n_layer) each n_ctx rows of kv_dim_v(layer) values of type
                           * kv_type_v; NULL where that is 0 */
    const int *tokens;    /* (n_tokens) input ids */
    const int *positions; /* (n_tokens) pos, pos+1, ... (learned position embeddings) */
    float *logits;        /* (n_logits, n_vocab): last token, or all when logits_all */
    void *pool;           /* runtime thread pool; opaque here */
    int n_ctx;            /* KV cache capacity in positions */
    int pos;              /* position of tokens[0] */
    int n_tokens;         /* 1..n_batch */
    int logits_all;       /* 0: logits of the last token only */
    int act_quant;        /* matmul activations: 0 f32 (exact: dot(dequant(W), x));
                           * 1 converted per row to the weight type's ggml
                           * vec_dot_type (Q8_0/Q8_1/Q8_K/F16/BF16) with integer
                           * dots, like llama.cpp's CPU backend (runtime/kernels/kern_q8.h) */
    float *hidden;        /* NULL, or (n_tokens, n_embd): the logits op (an encoder's
                           * embeddings op) copies its input, the final normalized
                           * hidden state, of every token here (embeddings) */
    float *state;         /* (cf_model_desc.state_floats) recurrent state of every
                           * layer that has one, as positions 0..pos-1 left it;
                           * NULL when the model has none */
    int kv_type_k;        /* ggml type of the K cache rows: CF_F32 (0), CF_F16, CF_Q8_0, CF_Q4_0;
                           * the quantized ones need kv_dim % 32 == 0 */
    int kv_type_v;        /* of the V cache rows; layers whose values are their keys'
                           * prefix (v == NULL, MLA) read them in kv_type_k */
};

/* What a generated module tells the runtime about itself. */
typedef struct cf_model_desc {
    int abi_version;      /* CF_ABI_VERSION it was generated against */
    const char *arch;     /* "llama" */
    const char *fingerprint; /* gguf_fingerprint of the model, 16 hex chars */
    int n_vocab;
    int n_embd;
    int n_layer;
    int n_ctx_train;
    int n_batch;          /* max tokens per cf_forward call */
    long arena_floats;    /* activation arena size for n_batch tokens */
    const int *kv_dim;    /* (n_layer) floats per position in each layer's K cache */
    const int *kv_dim_v;  /* (n_layer) floats per position in each layer's V cache (0: none) */
    int n_weights;
    const char *const *weight_names; /* (n_weights) GGUF tensor names */
    const int *weight_types;         /* (n_weights) ggml type ids */
    const long *weight_shapes;       /* (n_weights * 4) ne[0..3] */
    int encoder;          /* 1: an encoder (BERT-style embedding model): attention is
                           * bidirectional, so cf_forward must see the whole input in one
                           * call at pos 0 (n_tokens <= n_batch); there are no logits, the
                           * output is E->hidden.  0: a generative (causal) model */
    long state_floats;    /* recurrent state of all layers, fixed size (0: none) */
    const long *state_dim; /* (n_layer) floats of it per layer (0: no recurrent op) */
} cf_model_desc;

#endif
