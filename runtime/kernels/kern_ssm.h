/*
 * kern_ssm.h — kernels of the recurrent sequence mixers: the causal
 * depthwise conv1d with its rolling window (Mamba, Mamba-2, gated DeltaNet,
 * LFM2's short conv), the Mamba-1 selective scan and the Mamba-2 SSD scan,
 * and the gated delta rule (Qwen3-Next), plus the small elementwise ops those
 * families need (grouped RMSNorm, product, ReLU²).  templates/prelude.h
 * (cf_kernels.ssm_conv, ssm_scan, delta_net, ...) gives shapes, state layouts
 * and formulas; kern_table.c binds the drivers below per ISA.
 *
 * State.  Every op reads and writes its own part of cf_env.state; a call over
 * T tokens is the same computation as T calls of one token (for the conv and
 * the scans bit for bit; the gated delta rule runs prompt batches in the
 * chunked form, the same numbers up to float rounding).
 *
 * ISAs: a scalar reference (kern_ssm.c, the oracle every other leaf is tested
 * against; what builds for other architectures run), AVX2 + FMA leaves
 * (kern_ssm_avx2.c) and, inside KERN_ISA_AVX2 on CPUs with AVX-512
 * (kern_cpu_avx512vnni), the same leaves on 16-float zmm vectors
 * (kern_ssm_avx512.c; both from kern_ssm_simd.h).  exp/log follow libm in
 * the scalar leaves (expf, logf as ggml); the SIMD leaves use a polynomial
 * exp within a few ulp.
 *
 * Threads: the conv splits channels, the scans heads (Mamba-1: channels), the
 * delta rule key heads (each with its value heads), over E->pool when the
 * call is large enough.
 * Nothing here allocates: the delta rule's work space is op scratch the
 * emitter reserves in the arena (kern_delta_net_scratch_floats).
 */
#ifndef CINFER_KERN_SSM_H
#define CINFER_KERN_SSM_H

#include "prelude.h"

/* Tokens per chunk of the chunked gated delta rule, and the smallest batch
 * that uses it (shorter batches run the recurrence token by token). */
#define KERN_DN_CHUNK 16
#define KERN_DN_CHUNK_MIN 2

/* Floats of scratch delta_net needs: per key head (the unit the threads
 * share out) the chunk's normalised k and q and their products, and per value
 * head of it the decayed keys, u, S_0ᵀ k and S_0ᵀ q and the decay matrix. */
long kern_delta_net_scratch_floats(int n_v_head, int d_k, int d_v);

/* How delta_net evaluates a batch: AUTO (chunked from KERN_DN_CHUNK_MIN
 * tokens on), the per-token RECURRENT form, or the CHUNKED form (tests and
 * benchmarks compare the two). */
enum { KERN_DN_AUTO = 0, KERN_DN_RECURRENT = 1, KERN_DN_CHUNKED = 2 };

/* The cf_kernels entries (shapes: templates/prelude.h), through isa's leaves. */
void kern_drv_ssm_conv(int isa, cf_env *E, float *y, const float *x, const float *w,
                       const float *b, float *state, int n, int d_conv, int act, int n_tok);
void kern_drv_ssm_scan(int isa, cf_env *E, float *y, const float *x, const float *dt,
                       const float *bc, const float *A, const float *D, const float *dt_bias,
                       float *state, int n_head, int head_dim, int d_state, int n_group,
                       int a_per_state, int n_tok);
/* mode: KERN_DN_*; the cf_kernels entry passes KERN_DN_AUTO. */
void kern_drv_delta_net(int isa, cf_env *E, float *o, const float *qkv, const float *ba,
                        const float *A, const float *dt_bias, float *state, int n_k_head,
                        int n_v_head, int d_k, int d_v, float eps, float *scratch, int n_tok,
                        int mode);
/* One portable implementation for every ISA (memory-bound). */
void kern_rms_norm_groups(cf_env *E, float *y, const float *x, const float *w, int group,
                          int n_group, float eps, int n_tok);

/* ---- internal: the per-ISA leaves (kern_ssm.c, kern_ssm_avx2.c, kern_ssm_avx512.c) ---- */

typedef struct {
    /* ssm_conv over channels [c0, c1) of all n_tok tokens, state included
     * (prelude.h layout: state (d_conv - 1, n), w (n, d_conv)). */
    void (*conv)(float *y, const float *x, const float *w, const float *b, float *state, int n,
                 int c0, int c1, int d_conv, int act, int n_tok);
    /* Mamba-2, one head, one token: for p < head_dim, s < d_state:
     * S[p][s] = S[p][s]·dA + B[s]·(x[p]·dt); y[p] = Σ_s S[p][s]·C[s]. */
    void (*scan2)(float *S, const float *x, float dt, float dA, const float *B, const float *C,
                  float *y, int head_dim, int d_state);
    /* Mamba-1, n_chan channels of one token (head_dim 1; pointers at the first
     * channel, dt = softplus already taken): S[c][s] = S·exp(dt[c]·A[c][s])
     * + B[s]·dt[c]·x[c]; y[c] = Σ_s S[c][s]·C[s]. */
    void (*scan1)(float *S, const float *x, const float *dt, const float *A, const float *B,
                  const float *C, float *y, int n_chan, int d_state);
    /* Gated delta rule, one value head, one token; S (d_k rows of d_v):
     * S = decay·S; u = β(v − Sᵀk); S += k uᵀ; o = Sᵀ q.  (The SIMD leaves
     * take Sᵀk and Sᵀq from the old S in one pass — o = decay·Sᵀq + u·(k·q) —
     * and then update S in a second.) */
    void (*delta)(float *S, const float *q, const float *k, const float *v, float decay,
                  float beta, float *o, int d_k, int d_v);
    /* y (d) = x / sqrt(Σx² + eps) · post, as llama.cpp's L2 norm (rms_norm with
     * eps / d, then · 1/sqrt(d)). */
    void (*l2_norm)(float *y, const float *x, int d, float eps, float post);
    /* y (n) = a·x + b·z (z NULL: y = a·x).  y may alias x or z. */
    void (*axpby)(float *y, float a, const float *x, float b, const float *z, int n);
    /* C (m x n, row stride ldc) = c_scale·C + A (m x k, lda) · B (k x n, ldb),
     * all row-major; c_scale 0: C is only written.  The chunked delta rule's
     * products with the state (n = d_v: the vectors run along B's and C's rows). */
    void (*gemm)(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int m, int n,
                 int k, float c_scale);
} kern_ssm_leaves;

extern const kern_ssm_leaves kern_ssm_scalar_leaves;
#if defined(__x86_64__)
extern const kern_ssm_leaves kern_ssm_avx2_leaves;
extern const kern_ssm_leaves kern_ssm_avx512_leaves;
#endif

/* The leaves isa runs on this CPU (AVX-512 ones inside KERN_ISA_AVX2 when
 * available); tests compare each with kern_ssm_scalar_leaves. */
const kern_ssm_leaves *kern_ssm_leaves_for(int isa);

#endif
