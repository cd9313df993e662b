/*
 * kern_ssm.c — the recurrent-layer drivers (threading, the chunked delta
 * rule) and their scalar reference leaves; see kern_ssm.h.
 *
 * Numerics follow ggml-cpu's ops.cpp so parity with llama.cpp holds: the
 * conv sums its taps in float oldest first, then adds the bias and applies
 * silu (x / (1 + expf(-x))); the scans take softplus(dt) = dt > 20 ? dt :
 * logf(1 + expf(dt)) and exp of dt·A per head (Mamba-2) or per state
 * (Mamba-1); the delta rule L2-normalises q and k as llama.cpp builds it
 * (rms_norm with eps / d, then * 1/sqrt(d)), β = 1 / (1 + expf(-b)).
 *
 * The chunked delta rule (prompt batches).  For a chunk of L tokens with
 * cumulative log-decays Γ_t = g_1 + ... + g_t, the recurrence S_t = e^{g_t}
 * S_{t-1} + k_t u_tᵀ, u_t = β_t (v_t − e^{g_t} S_{t-1}ᵀ k_t) unrolls to
 *   u_t = β_t v_t − β_t e^{Γ_t} S_0ᵀ k_t − Σ_{s<t} β_t e^{Γ_t−Γ_s} (k_t·k_s) u_s
 *   o_t = e^{Γ_t} S_0ᵀ q_t + Σ_{s≤t} e^{Γ_t−Γ_s} (q_t·k_s) u_s
 *   S_L = e^{Γ_L} S_0 + Σ_s e^{Γ_L−Γ_s} k_s u_sᵀ
 * (the WY form of Yang et al., "Gated Delta Networks", 2024; llama.cpp's
 * build_delta_net_chunking).  Everything but the triangular solve for u is a
 * small matrix product: [K; Q] S_0 and P' U and the state update Kdᵀ U with
 * the leaves' gemm (rows of d_v in registers), K Kᵀ and Q Kᵀ with the ISA's
 * tile_mm (kern.h).  So the state is read and written once per chunk
 * (KERN_DN_CHUNK tokens) instead of once per token: measured 1.4-1.8x the
 * recurrence's prompt speed at Qwen3-Next's sizes (tools/bench_ssm.c).  The
 * work of a key head (its normalised q and k, K Kᵀ, Q Kᵀ) is shared by its
 * value heads, so the threads take key heads.
 */
#include "kern_ssm.h"

#include <math.h>
#include <string.h>

#include "base/pool.h"
#include "kern.h"

static inline float silu_f(float v) { return v / (1.0f + expf(-v)); }
static inline float softplus_f(float v) { return v > 20.0f ? v : logf(1.0f + expf(v)); }
static inline float sigmoid_f(float v) { return 1.0f / (1.0f + expf(-v)); }

/* ==== scalar leaves =========================================================== */

static void sc_conv(float *y, const float *x, const float *w, const float *b, float *state, int n,
                    int c0, int c1, int d_conv, int act, int n_tok) {
    const int nw = d_conv - 1; /* window rows kept in the state */
    for (int c = c0; c < c1; c++) {
        const float *wc = w + (size_t)c * d_conv;
        for (int t = 0; t < n_tok; t++) {
            float acc = 0.0f;
            for (int i = 0; i < d_conv; i++) {
                int j = t + i; /* row of [state; x] */
                float v = j < nw ? state[(size_t)j * n + c] : x[(size_t)(j - nw) * n + c];
                acc += wc[i] * v;
            }
            if (b) acc += b[c];
            y[(size_t)t * n + c] = act == CF_ACT_SILU ? silu_f(acc) : acc;
        }
        /* new window: rows n_tok .. n_tok + nw - 1 of [state; x]; reading ahead of writing */
        for (int r = 0; r < nw; r++) {
            int j = n_tok + r;
            state[(size_t)r * n + c] = j < nw ? state[(size_t)j * n + c] : x[(size_t)(j - nw) * n + c];
        }
    }
}

static void sc_scan2(float *S, const float *x, float dt, float dA, const float *B, const float *C,
                     float *y, int head_dim, int d_state) {
    for (int p = 0; p < head_dim; p++) {
        float *s = S + (size_t)p * d_state;
        const float xdt = x[p] * dt;
        float acc = 0.0f;
        for (int i = 0; i < d_state; i++) {
            const float st = s[i] * dA + B[i] * xdt;
            acc += st * C[i];
            s[i] = st;
        }
        y[p] = acc;
    }
}

static void sc_scan1(float *S, const float *x, const float *dt, const float *A, const float *B,
                     const float *C, float *y, int n_chan, int d_state) {
    for (int c = 0; c < n_chan; c++) {
        float *s = S + (size_t)c * d_state;
        const float *a = A + (size_t)c * d_state;
        const float xdt = x[c] * dt[c];
        float acc = 0.0f;
        for (int i = 0; i < d_state; i++) {
            const float st = s[i] * expf(dt[c] * a[i]) + B[i] * xdt;
            acc += st * C[i];
            s[i] = st;
        }
        y[c] = acc;
    }
}

static void sc_delta(float *S, const float *q, const float *k, const float *v, float decay,
                     float beta, float *o, int d_k, int d_v) {
    for (long i = 0; i < (long)d_k * d_v; i++) S[i] *= decay;
    for (int j = 0; j < d_v; j++) {
        float sk = 0.0f;
        for (int i = 0; i < d_k; i++) sk += S[(size_t)i * d_v + j] * k[i];
        const float u = (v[j] - sk) * beta;
        float sq = 0.0f;
        for (int i = 0; i < d_k; i++) {
            float *s = &S[(size_t)i * d_v + j];
            *s += k[i] * u;
            sq += *s * q[i];
        }
        o[j] = sq;
    }
}

/* rms_norm(x, eps/d) (double sum, float mean) then · 1/sqrt(d), as llama.cpp builds it */
static void sc_l2_norm(float *y, const float *x, int d, float eps, float post) {
    double sum = 0.0;
    for (int i = 0; i < d; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / d);
    const float scale = 1.0f / sqrtf(mean + eps / (float)d), inv_sqrt = 1.0f / sqrtf((float)d);
    for (int i = 0; i < d; i++) y[i] = x[i] * scale * inv_sqrt * post;
}

static void sc_gemm(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int m, int n, int k,
                    float c_scale) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = c_scale != 0.0f ? c_scale * C[(size_t)i * ldc + j] : 0.0f;
            for (int p = 0; p < k; p++) acc += A[(size_t)i * lda + p] * B[(size_t)p * ldb + j];
            C[(size_t)i * ldc + j] = acc;
        }
}

static void sc_axpby(float *y, float a, const float *x, float b, const float *z, int n) {
    if (z)
        for (int i = 0; i < n; i++) y[i] = a * x[i] + b * z[i];
    else
        for (int i = 0; i < n; i++) y[i] = a * x[i];
}

const kern_ssm_leaves kern_ssm_scalar_leaves = {
    .conv = sc_conv, .scan2 = sc_scan2, .scan1 = sc_scan1, .delta = sc_delta,
    .l2_norm = sc_l2_norm, .axpby = sc_axpby, .gemm = sc_gemm,
};

/* x86-64 has SIMD leaves; other builds (aarch64 bundles) run the scalar ones. */
const kern_ssm_leaves *kern_ssm_leaves_for(int isa) {
#if defined(__x86_64__)
    if (isa == KERN_ISA_AVX2 && kern_isa_available(KERN_ISA_AVX2))
        return kern_cpu_avx512vnni() ? &kern_ssm_avx512_leaves : &kern_ssm_avx2_leaves;
#endif
    (void)isa;
    return &kern_ssm_scalar_leaves;
}

static const kern_isa_ops *isa_ops(int isa) {
#if defined(__x86_64__)
    if (isa == KERN_ISA_AVX2 && kern_isa_available(KERN_ISA_AVX2)) return &kern_avx2_ops;
#endif
    (void)isa;
    return &kern_scalar_ops;
}

/* ==== threading ================================================================ */

/* Below this much work (multiply-adds) a call stays on the calling thread. */
#define SSM_PAR_MIN 32768L

static void ssm_run(cf_env *E, long work, void (*fn)(void *, int, int), void *arg) {
    if (work < SSM_PAR_MIN || !E->pool) fn(arg, 0, 1);
    else pool_run((pool *)E->pool, fn, arg);
}

/* [*lo, *hi) = part ith of nth of [0, n). */
static void split(long n, int ith, int nth, long *lo, long *hi) {
    *lo = n * ith / nth;
    *hi = n * (ith + 1) / nth;
}

/* ==== ssm_conv ================================================================== */

typedef struct {
    const kern_ssm_leaves *lv;
    float *y;
    const float *x, *w, *b;
    float *state;
    int n, d_conv, act, n_tok;
} conv_job;

static void conv_worker(void *arg, int ith, int nth) {
    const conv_job *j = arg;
    /* channel ranges in multiples of 16 (whole SIMD vectors) */
    long nb = (j->n + 15) / 16, b0, b1;
    split(nb, ith, nth, &b0, &b1);
    int c0 = (int)(b0 * 16), c1 = (int)(b1 * 16 < j->n ? b1 * 16 : j->n);
    if (c0 < c1) j->lv->conv(j->y, j->x, j->w, j->b, j->state, j->n, c0, c1, j->d_conv, j->act, j->n_tok);
}

void kern_drv_ssm_conv(int isa, cf_env *E, float *y, const float *x, const float *w,
                       const float *b, float *state, int n, int d_conv, int act, int n_tok) {
    conv_job j = {kern_ssm_leaves_for(isa), y, x, w, b, state, n, d_conv, act, n_tok};
    ssm_run(E, (long)n * d_conv * n_tok, conv_worker, &j);
}

/* ==== ssm_scan ================================================================== */

typedef struct {
    const kern_ssm_leaves *lv;
    float *y;
    const float *x, *dt, *bc, *A, *D, *dt_bias;
    float *state;
    int n_head, head_dim, d_state, n_group, n_tok;
} scan_job;

/* Mamba-2: heads [h0, h1), each over all tokens (its head_dim x d_state
 * state, 32 KB at 64 x 128, stays in cache while the tokens stream past). */
static void scan2_worker(void *arg, int ith, int nth) {
    const scan_job *j = arg;
    long h0, h1;
    split(j->n_head, ith, nth, &h0, &h1);
    const int n = j->n_head * j->head_dim, n_bc = 2 * j->n_group * j->d_state;
    const int per_group = j->n_head / j->n_group;
    for (long h = h0; h < h1; h++) {
        const int g = (int)h / per_group;
        float *S = j->state + (size_t)h * j->head_dim * j->d_state;
        for (int t = 0; t < j->n_tok; t++) {
            const float *bt = j->bc + (size_t)t * n_bc + (size_t)g * j->d_state;
            const float dv = j->dt[(size_t)t * j->n_head + h];
            const float d = j->dt_bias ? dv + j->dt_bias[h] : dv;
            const float sp = softplus_f(d), dA = expf(sp * j->A[h]);
            const float *xh = j->x + (size_t)t * n + h * j->head_dim;
            float *yh = j->y + (size_t)t * n + h * j->head_dim;
            j->lv->scan2(S, xh, sp, dA, bt, bt + (size_t)j->n_group * j->d_state, yh, j->head_dim, j->d_state);
            if (j->D)
                for (int p = 0; p < j->head_dim; p++) yh[p] += xh[p] * j->D[h];
        }
    }
}

/* Mamba-1: channels [c0, c1) (head_dim 1, one group; dt per channel), in
 * blocks of up to 256 channels, each block over all tokens. */
static void scan1_worker(void *arg, int ith, int nth) {
    const scan_job *j = arg;
    long c0, c1;
    split(j->n_head / 8, ith, nth, &c0, &c1); /* whole groups of 8 channels */
    c0 *= 8;
    c1 = ith == nth - 1 ? j->n_head : c1 * 8;
    const int n = j->n_head;
    float sp[256];
    for (long cb = c0; cb < c1; cb += 256) {
        const int nc = (int)(c1 - cb < 256 ? c1 - cb : 256);
        for (int t = 0; t < j->n_tok; t++) {
            const float *xt = j->x + (size_t)t * n + cb, *dtt = j->dt + (size_t)t * n + cb;
            const float *bt = j->bc + (size_t)t * 2 * j->d_state;
            float *yt = j->y + (size_t)t * n + cb;
            for (int c = 0; c < nc; c++) sp[c] = softplus_f(j->dt_bias ? dtt[c] + j->dt_bias[cb + c] : dtt[c]);
            j->lv->scan1(j->state + (size_t)cb * j->d_state, xt, sp, j->A + (size_t)cb * j->d_state, bt,
                         bt + j->d_state, yt, nc, j->d_state);
            if (j->D)
                for (int c = 0; c < nc; c++) yt[c] += xt[c] * j->D[cb + c];
        }
    }
}

void kern_drv_ssm_scan(int isa, cf_env *E, float *y, const float *x, const float *dt,
                       const float *bc, const float *A, const float *D, const float *dt_bias,
                       float *state, int n_head, int head_dim, int d_state, int n_group,
                       int a_per_state, int n_tok) {
    scan_job j = {kern_ssm_leaves_for(isa), y, x, dt, bc, A, D, dt_bias, state,
                  n_head, head_dim, d_state, n_group, n_tok};
    long work = (long)n_head * head_dim * d_state * n_tok * (a_per_state ? 4 : 1);
    ssm_run(E, work, a_per_state ? scan1_worker : scan2_worker, &j);
}

/* ==== delta_net ==================================================================== */

/* The work space of one key head (threads share the key heads out: a key
 * head's normalised q and k and their products serve its r = n_v / n_k value
 * heads), offsets in floats, 16-aligned; the per-value-head part repeats r
 * times from `per_v`. */
typedef struct {
    long kq, ap;                           /* per key head */
    long kdt, u, ks, pp, dm, beta, gam, eg; /* per value head, relative to its block */
    long per_v, v0, total;
} dn_layout;

static long up16(long n) { return (n + 15) & ~15L; }

static dn_layout dn_layout_of(int r, int d_k, int d_v) {
    const long C = KERN_DN_CHUNK;
    dn_layout l;
    long o = 0;
    l.kq = o, o += up16(2 * C * d_k);   /* the chunk's normalised k rows, then its q rows */
    l.ap = o, o += up16(2 * C * C);     /* k_t·k_s, then q_t·k_s */
    l.v0 = o;
    long v = 0;
    l.kdt = v, v += up16(C * d_k);      /* (d_k, C): e^{Γ_L−Γ_s} k_s[i] */
    l.u = v, v += up16(C * d_v);
    l.ks = v, v += up16(2 * C * d_v);   /* S_0ᵀ k_t, then S_0ᵀ q_t */
    l.pp = v, v += up16(C * C);         /* e^{Γ_t−Γ_s} q_t·k_s, s <= t; 0 above */
    l.dm = v, v += up16(C * C);         /* e^{Γ_t−Γ_s}, s <= t */
    l.beta = v, v += up16(C);
    l.gam = v, v += up16(C);
    l.eg = v, v += up16(C);             /* e^{Γ_t} */
    l.per_v = v;
    l.total = o + (long)r * v;
    return l;
}

long kern_delta_net_scratch_floats(int n_v_head, int d_k, int d_v) {
    /* n_k_head is not an argument: size for the worst case r = n_v (one key head) */
    return (long)n_v_head * dn_layout_of(1, d_k, d_v).total;
}

typedef struct {
    const kern_ssm_leaves *lv;
    const kern_isa_ops *ops;
    float *o;
    const float *qkv, *ba, *A, *dt_bias;
    float *state, *scratch;
    int n_k_head, n_v_head, d_k, d_v, n_tok, chunked;
    float eps;
    dn_layout lay;
} dn_job;

/* Token t's beta and log-decay for value head h. */
static void dn_gates(const dn_job *j, int t, int h, float *beta, float *g) {
    const int r = j->n_v_head / j->n_k_head, kh = h / r, i = h % r;
    const float *ba = j->ba + (size_t)t * 2 * j->n_v_head + (size_t)kh * 2 * r;
    *beta = sigmoid_f(ba[i]);
    const float a = j->dt_bias ? ba[r + i] + j->dt_bias[h] : ba[r + i];
    *g = softplus_f(a) * j->A[h];
}

/* Key head kh and its value heads, token by token. */
static void dn_khead_recurrent(const dn_job *j, int kh, float *ws) {
    const int nk = j->n_k_head, nv = j->n_v_head, dk = j->d_k, dv = j->d_v, r = nv / nk;
    const int width = 2 * nk * dk + nv * dv;
    const float qscale = 1.0f / sqrtf((float)dk);
    float *kn = ws + j->lay.kq, *qn = kn + dk;
    for (int t = 0; t < j->n_tok; t++) {
        const float *row = j->qkv + (size_t)t * width;
        j->lv->l2_norm(qn, row + (size_t)kh * dk, dk, j->eps, qscale);
        j->lv->l2_norm(kn, row + (size_t)(nk + kh) * dk, dk, j->eps, 1.0f);
        for (int h = kh * r; h < (kh + 1) * r; h++) {
            float beta, g;
            dn_gates(j, t, h, &beta, &g);
            j->lv->delta(j->state + (size_t)h * dk * dv, qn, kn, row + (size_t)2 * nk * dk + (size_t)h * dv,
                         expf(g), beta, j->o + (size_t)t * nv * dv + (size_t)h * dv, dk, dv);
        }
    }
}

/* The chunked form (file comment), key head kh and its value heads: per chunk
 * of L tokens the key head's normalised k and q and their products k·k, q·k
 * once; per value head the state is read once (S_0ᵀ k_t and S_0ᵀ q_t for all
 * t in one product) and written once (S_L = e^{Γ_L} S_0 + Kdᵀ U); the rest
 * is L x L work. */
static void dn_khead_chunked(const dn_job *j, int kh, float *ws) {
    const int nk = j->n_k_head, nv = j->n_v_head, dk = j->d_k, dv = j->d_v, C = KERN_DN_CHUNK, r = nv / nk;
    const int width = 2 * nk * dk + nv * dv;
    const float qscale = 1.0f / sqrtf((float)dk);
    const size_t ostride = (size_t)nv * dv;
    float *kq = ws + j->lay.kq, *ap = ws + j->lay.ap;
    const kern_isa_ops *ops = j->ops;
    const kern_ssm_leaves *lv = j->lv;
    for (int t0 = 0; t0 < j->n_tok; t0 += C) {
        const int L = j->n_tok - t0 < C ? j->n_tok - t0 : C;
        const float *pq = ap + (size_t)L * C;
        /* the next chunk's q, k and v rows of this key head sit 1 row (tens of
         * KiB) apart, too far for the hardware prefetcher: ask for them now */
        for (int t = t0 + C; t < t0 + 2 * C && t < j->n_tok; t++) {
            const float *row = j->qkv + (size_t)t * width;
            for (int part = 0; part < 2; part++)
                for (int c = 0; c < dk; c += 16) __builtin_prefetch(row + (size_t)(part * nk + kh) * dk + c);
            for (int c = 0; c < r * dv; c += 16) __builtin_prefetch(row + (size_t)2 * nk * dk + (size_t)kh * r * dv + c);
        }
        /* normalised k (rows 0..L-1 of kq) and q (rows L..2L-1); ap = [k_t·k_s; q_t·k_s] */
        for (int t = 0; t < L; t++) {
            const float *row = j->qkv + (size_t)(t0 + t) * width;
            lv->l2_norm(kq + (size_t)t * dk, row + (size_t)(nk + kh) * dk, dk, j->eps, 1.0f);
            lv->l2_norm(kq + (size_t)(L + t) * dk, row + (size_t)kh * dk, dk, j->eps, qscale);
        }
        ops->tile_mm(kq, (size_t)dk, L, kq, (size_t)dk, 2 * L, dk, ap, (size_t)C, 0);
        for (int h = kh * r; h < (kh + 1) * r; h++) {
            float *vw = ws + j->lay.v0 + (size_t)(h - kh * r) * j->lay.per_v;
            float *kdt = vw + j->lay.kdt, *u = vw + j->lay.u, *ks = vw + j->lay.ks, *pp = vw + j->lay.pp;
            float *dm = vw + j->lay.dm, *beta = vw + j->lay.beta, *gam = vw + j->lay.gam, *eg = vw + j->lay.eg;
            float *S = j->state + (size_t)h * dk * dv;
            const float *v0 = j->qkv + (size_t)t0 * width + (size_t)2 * nk * dk + (size_t)h * dv;
            float *o0 = j->o + (size_t)t0 * ostride + (size_t)h * dv;
            /* β; Γ; e^{Γ_t}; e^{Γ_t−Γ_s}; P' = e^{Γ_t−Γ_s} q_t·k_s (lower triangle) */
            for (int t = 0; t < L; t++) {
                float g;
                dn_gates(j, t0 + t, h, &beta[t], &g);
                gam[t] = t ? gam[t - 1] + g : g;
                eg[t] = expf(gam[t]);
                for (int s = 0; s <= t; s++) {
                    dm[(size_t)t * C + s] = expf(gam[t] - gam[s]);
                    pp[(size_t)t * C + s] = dm[(size_t)t * C + s] * pq[(size_t)t * C + s];
                }
                for (int s = t + 1; s < L; s++) pp[(size_t)t * C + s] = 0.0f;
            }
            /* ks = [S_0ᵀ k_t; S_0ᵀ q_t] (rows of d_v) */
            lv->gemm(ks, dv, kq, dk, S, dv, 2 * L, dv, dk, 0.0f);
            /* u_t = β_t (v_t − e^{Γ_t} S_0ᵀ k_t) − Σ_{s<t} β_t e^{Γ_t−Γ_s} (k_t·k_s) u_s */
            for (int t = 0; t < L; t++) {
                float *ur = u + (size_t)t * dv;
                lv->axpby(ur, beta[t], v0 + (size_t)t * width, -beta[t] * eg[t], ks + (size_t)t * dv, dv);
                for (int s = 0; s < t; s++)
                    ops->axpy(ur, -beta[t] * dm[(size_t)t * C + s] * ap[(size_t)t * C + s], u + (size_t)s * dv, dv);
            }
            /* o_t = e^{Γ_t} S_0ᵀ q_t + Σ_{s≤t} P'_ts u_s */
            for (int t = 0; t < L; t++)
                lv->axpby(o0 + (size_t)t * ostride, eg[t], ks + (size_t)(L + t) * dv, 0.0f, NULL, dv);
            lv->gemm(o0, (int)ostride, pp, C, u, dv, L, dv, L, 1.0f);
            /* S_L = e^{Γ_L} S_0 + Σ_s (e^{Γ_L−Γ_s} k_s) u_sᵀ */
            for (int i = 0; i < dk; i++)
                for (int s = 0; s < L; s++)
                    kdt[(size_t)i * C + s] = dm[(size_t)(L - 1) * C + s] * kq[(size_t)s * dk + i];
            lv->gemm(S, dv, kdt, C, u, dv, dk, dv, L, eg[L - 1]);
        }
    }
}

static void dn_worker(void *arg, int ith, int nth) {
    const dn_job *j = arg;
    long k0, k1;
    split(j->n_k_head, ith, nth, &k0, &k1);
    for (long kh = k0; kh < k1; kh++) {
        float *ws = j->scratch + (size_t)kh * j->lay.total;
        if (j->chunked) dn_khead_chunked(j, (int)kh, ws);
        else dn_khead_recurrent(j, (int)kh, ws);
    }
}

void kern_drv_delta_net(int isa, cf_env *E, float *o, const float *qkv, const float *ba,
                        const float *A, const float *dt_bias, float *state, int n_k_head,
                        int n_v_head, int d_k, int d_v, float eps, float *scratch, int n_tok,
                        int mode) {
    int chunked = mode == KERN_DN_CHUNKED || (mode == KERN_DN_AUTO && n_tok >= KERN_DN_CHUNK_MIN);
    dn_job j = {kern_ssm_leaves_for(isa), isa_ops(isa), o, qkv, ba, A, dt_bias, state, scratch,
                n_k_head, n_v_head, d_k, d_v, n_tok, chunked, eps,
                dn_layout_of(n_v_head / n_k_head, d_k, d_v)};
    ssm_run(E, (long)n_v_head * d_k * d_v * n_tok * 4, dn_worker, &j);
}

/* ==== elementwise ================================================================== */

void kern_rms_norm_groups(cf_env *E, float *y, const float *x, const float *w, int group,
                          int n_group, float eps, int n_tok) {
    (void)E;
    for (long r = 0; r < (long)n_tok * n_group; r++) {
        const float *xr = x + r * group, *wr = w + (r % n_group) * group;
        float *yr = y + r * group;
        double sum = 0.0;
        for (int i = 0; i < group; i++) sum += (double)(xr[i] * xr[i]);
        const float mean = (float)(sum / group), scale = 1.0f / sqrtf(mean + eps);
        for (int i = 0; i < group; i++) {
            const float v = xr[i] * scale;
            yr[i] = v * wr[i];
        }
    }
}

