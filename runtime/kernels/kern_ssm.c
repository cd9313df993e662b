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
 * small matrix product (K S_0, K Kᵀ, Q S_0, Q Kᵀ, P U, Kᵀ U), run with the
 * ISA's register-blocked tile_mm (kern.h), so the state is streamed once per
 * chunk instead of once per token.
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

static void sc_delta(float *M, const float *q, const float *k, const float *v, float decay,
                     float beta, float *o, int d_k, int d_v) {
    for (int j = 0; j < d_v; j++) {
        float *m = M + (size_t)j * d_k;
        float sk = 0.0f;
        for (int i = 0; i < d_k; i++) {
            m[i] *= decay;
            sk += m[i] * k[i];
        }
        const float u = (v[j] - sk) * beta;
        float sq = 0.0f;
        for (int i = 0; i < d_k; i++) {
            m[i] += u * k[i];
            sq += m[i] * q[i];
        }
        o[j] = sq;
    }
}

const kern_ssm_leaves kern_ssm_scalar_leaves = {
    .conv = sc_conv, .scan2 = sc_scan2, .scan1 = sc_scan1, .delta = sc_delta,
};

const kern_ssm_leaves *kern_ssm_leaves_for(int isa) {
    if (isa == KERN_ISA_AVX2 && kern_isa_available(KERN_ISA_AVX2))
        return kern_cpu_avx512vnni() ? &kern_ssm_avx512_leaves : &kern_ssm_avx2_leaves;
    return &kern_ssm_scalar_leaves;
}

static const kern_isa_ops *isa_ops(int isa) {
    return isa == KERN_ISA_AVX2 && kern_isa_available(KERN_ISA_AVX2) ? &kern_avx2_ops
                                                                     : &kern_scalar_ops;
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

/* Mamba-2: heads [h0, h1) of every token, token by token. */
static void scan2_worker(void *arg, int ith, int nth) {
    const scan_job *j = arg;
    long h0, h1;
    split(j->n_head, ith, nth, &h0, &h1);
    const int n = j->n_head * j->head_dim, n_bc = 2 * j->n_group * j->d_state;
    const int per_group = j->n_head / j->n_group;
    for (int t = 0; t < j->n_tok; t++) {
        const float *xt = j->x + (size_t)t * n, *dtt = j->dt + (size_t)t * j->n_head;
        const float *bt = j->bc + (size_t)t * n_bc, *ct = bt + (size_t)j->n_group * j->d_state;
        float *yt = j->y + (size_t)t * n;
        for (long h = h0; h < h1; h++) {
            const float d = j->dt_bias ? dtt[h] + j->dt_bias[h] : dtt[h];
            const float sp = softplus_f(d), dA = expf(sp * j->A[h]);
            const int g = (int)h / per_group;
            const float *xh = xt + h * j->head_dim;
            float *yh = yt + h * j->head_dim;
            j->lv->scan2(j->state + (size_t)h * j->head_dim * j->d_state, xh, sp, dA,
                         bt + (size_t)g * j->d_state, ct + (size_t)g * j->d_state, yh, j->head_dim,
                         j->d_state);
            if (j->D)
                for (int p = 0; p < j->head_dim; p++) yh[p] += xh[p] * j->D[h];
        }
    }
}

/* Mamba-1: channels [c0, c1) (head_dim 1, one group); dt is per channel. */
static void scan1_worker(void *arg, int ith, int nth) {
    const scan_job *j = arg;
    long c0, c1;
    split(j->n_head / 8, ith, nth, &c0, &c1); /* whole groups of 8 channels */
    c0 *= 8;
    c1 = ith == nth - 1 ? j->n_head : c1 * 8;
    if (c0 >= c1) return;
    const int n = j->n_head;
    float sp[256];
    for (int t = 0; t < j->n_tok; t++) {
        const float *xt = j->x + (size_t)t * n, *dtt = j->dt + (size_t)t * n;
        const float *bt = j->bc + (size_t)t * 2 * j->d_state, *ct = bt + j->d_state;
        float *yt = j->y + (size_t)t * n;
        for (long cb = c0; cb < c1; cb += 256) {
            int ce = (int)(c1 - cb < 256 ? c1 : cb + 256);
            for (int c = (int)cb; c < ce; c++) {
                const float d = j->dt_bias ? dtt[c] + j->dt_bias[c] : dtt[c];
                sp[c - cb] = softplus_f(d);
            }
            j->lv->scan1(j->state + (size_t)cb * j->d_state, xt + cb, sp, j->A + (size_t)cb * j->d_state,
                         bt, ct, yt + cb, ce - (int)cb, j->d_state);
            if (j->D)
                for (int c = (int)cb; c < ce; c++) yt[c] += xt[c] * j->D[c];
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

/* Per value head: the offsets (floats, 16-aligned) of the chunk work space. */
typedef struct {
    long qn, kn, kdt, u, ut, ks, a, p, beta, gam, total;
} dn_layout;

static long up16(long n) { return (n + 15) & ~15L; }

static dn_layout dn_layout_of(int d_k, int d_v) {
    const long C = KERN_DN_CHUNK;
    dn_layout l;
    long o = 0;
    l.qn = o, o += up16(C * d_k);
    l.kn = o, o += up16(C * d_k);
    l.kdt = o, o += up16(C * d_k);
    l.u = o, o += up16(C * d_v);
    l.ut = o, o += up16(C * d_v);
    l.ks = o, o += up16(C * d_v);
    l.a = o, o += up16(C * C);
    l.p = o, o += up16(C * C);
    l.beta = o, o += up16(C);
    l.gam = o, o += up16(C);
    l.total = o;
    return l;
}

long kern_delta_net_scratch_floats(int n_v_head, int d_k, int d_v) {
    return (long)n_v_head * dn_layout_of(d_k, d_v).total;
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

/* y (d) = x / sqrt(Σx² + eps) the way llama.cpp builds it: rms_norm(x, eps/d)
 * (double sum, float mean) then * 1/sqrt(d); then * post (q's 1/sqrt(d_k)). */
static void l2_norm(float *y, const float *x, int d, float eps, float post) {
    double sum = 0.0;
    for (int i = 0; i < d; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / d);
    const float scale = 1.0f / sqrtf(mean + eps / (float)d), inv_sqrt = 1.0f / sqrtf((float)d);
    for (int i = 0; i < d; i++) y[i] = x[i] * scale * inv_sqrt * post;
}

/* Token t's beta and log-decay for value head h. */
static void dn_gates(const dn_job *j, int t, int h, float *beta, float *g) {
    const int r = j->n_v_head / j->n_k_head, kh = h / r, i = h % r;
    const float *ba = j->ba + (size_t)t * 2 * j->n_v_head + (size_t)kh * 2 * r;
    *beta = sigmoid_f(ba[i]);
    const float a = j->dt_bias ? ba[r + i] + j->dt_bias[h] : ba[r + i];
    *g = softplus_f(a) * j->A[h];
}

static void dn_head_recurrent(const dn_job *j, int h, float *ws) {
    const int nk = j->n_k_head, nv = j->n_v_head, dk = j->d_k, dv = j->d_v;
    const int kh = h / (nv / nk), width = 2 * nk * dk + nv * dv;
    const float qscale = 1.0f / sqrtf((float)dk);
    float *qn = ws + j->lay.qn, *kn = ws + j->lay.kn;
    float *M = j->state + (size_t)h * dv * dk;
    for (int t = 0; t < j->n_tok; t++) {
        const float *row = j->qkv + (size_t)t * width;
        l2_norm(qn, row + (size_t)kh * dk, dk, j->eps, qscale);
        l2_norm(kn, row + (size_t)(nk + kh) * dk, dk, j->eps, 1.0f);
        float beta, g;
        dn_gates(j, t, h, &beta, &g);
        j->lv->delta(M, qn, kn, row + (size_t)2 * nk * dk + (size_t)h * dv, expf(g), beta,
                     j->o + (size_t)t * nv * dv + (size_t)h * dv, dk, dv);
    }
}

static void dn_head_chunked(const dn_job *j, int h, float *ws) {
    const int nk = j->n_k_head, nv = j->n_v_head, dk = j->d_k, dv = j->d_v, C = KERN_DN_CHUNK;
    const int kh = h / (nv / nk), width = 2 * nk * dk + nv * dv;
    const float qscale = 1.0f / sqrtf((float)dk);
    const size_t ostride = (size_t)nv * dv;
    float *qn = ws + j->lay.qn, *kn = ws + j->lay.kn, *kdt = ws + j->lay.kdt;
    float *u = ws + j->lay.u, *ut = ws + j->lay.ut, *ks = ws + j->lay.ks;
    float *a = ws + j->lay.a, *p = ws + j->lay.p, *beta = ws + j->lay.beta, *gam = ws + j->lay.gam;
    float *M = j->state + (size_t)h * dv * dk;
    const kern_isa_ops *ops = j->ops;
    for (int t0 = 0; t0 < j->n_tok; t0 += C) {
        const int L = j->n_tok - t0 < C ? j->n_tok - t0 : C;
        const float *v0 = j->qkv + (size_t)t0 * width + (size_t)2 * nk * dk + (size_t)h * dv;
        float *o0 = j->o + (size_t)t0 * ostride + (size_t)h * dv;
        /* normalised q, k; β; cumulative log-decay Γ */
        for (int t = 0; t < L; t++) {
            const float *row = j->qkv + (size_t)(t0 + t) * width;
            l2_norm(qn + (size_t)t * dk, row + (size_t)kh * dk, dk, j->eps, qscale);
            l2_norm(kn + (size_t)t * dk, row + (size_t)(nk + kh) * dk, dk, j->eps, 1.0f);
            float g;
            dn_gates(j, t0 + t, h, &beta[t], &g);
            gam[t] = t ? gam[t - 1] + g : g;
        }
        /* ks[t][jv] = S_0ᵀ k_t, a[t][s] = k_t · k_s */
        ops->tile_mm(M, (size_t)dk, dv, kn, (size_t)dk, L, dk, ks, (size_t)dv, 0);
        ops->tile_mm(kn, (size_t)dk, L, kn, (size_t)dk, L, dk, a, (size_t)C, 0);
        /* u_t = β_t (v_t − e^{Γ_t} S_0ᵀ k_t) − Σ_{s<t} β_t e^{Γ_t−Γ_s} (k_t·k_s) u_s */
        for (int t = 0; t < L; t++) {
            float *ur = u + (size_t)t * dv;
            const float *vr = v0 + (size_t)t * width, *kr = ks + (size_t)t * dv;
            const float eg = expf(gam[t]);
            for (int jv = 0; jv < dv; jv++) ur[jv] = beta[t] * (vr[jv] - eg * kr[jv]);
            for (int s = 0; s < t; s++) {
                const float c = beta[t] * expf(gam[t] - gam[s]) * a[(size_t)t * C + s];
                ops->axpy(ur, -c, u + (size_t)s * dv, dv);
            }
        }
        for (int t = 0; t < L; t++)
            for (int jv = 0; jv < dv; jv++) ut[(size_t)jv * C + t] = u[(size_t)t * dv + jv];
        /* o_t = e^{Γ_t} S_0ᵀ q_t + Σ_{s≤t} e^{Γ_t−Γ_s} (q_t·k_s) u_s */
        ops->tile_mm(M, (size_t)dk, dv, qn, (size_t)dk, L, dk, ks, (size_t)dv, 0);
        ops->tile_mm(kn, (size_t)dk, L, qn, (size_t)dk, L, dk, p, (size_t)C, 0);
        for (int t = 0; t < L; t++) {
            float *pr = p + (size_t)t * C, *orow = o0 + (size_t)t * ostride;
            for (int s = 0; s <= t; s++) pr[s] *= expf(gam[t] - gam[s]);
            for (int s = t + 1; s < L; s++) pr[s] = 0.0f;
            const float eg = expf(gam[t]);
            for (int jv = 0; jv < dv; jv++) orow[jv] = eg * ks[(size_t)t * dv + jv];
        }
        ops->tile_mm(ut, (size_t)C, dv, p, (size_t)C, L, L, o0, ostride, 1);
        /* S_L = e^{Γ_L} S_0 + Σ_s e^{Γ_L−Γ_s} k_s u_sᵀ; M = S_Lᵀ */
        const float gl = gam[L - 1], el = expf(gl);
        for (int t = 0; t < L; t++) {
            const float e = expf(gl - gam[t]);
            for (int i = 0; i < dk; i++) kdt[(size_t)i * C + t] = kn[(size_t)t * dk + i] * e;
        }
        for (long i = 0; i < (long)dv * dk; i++) M[i] *= el;
        ops->tile_mm(kdt, (size_t)C, dk, ut, (size_t)C, dv, L, M, (size_t)dk, 1);
    }
}

static void dn_worker(void *arg, int ith, int nth) {
    const dn_job *j = arg;
    long h0, h1;
    split(j->n_v_head, ith, nth, &h0, &h1);
    for (long h = h0; h < h1; h++) {
        float *ws = j->scratch + (size_t)h * j->lay.total;
        if (j->chunked) dn_head_chunked(j, (int)h, ws);
        else dn_head_recurrent(j, (int)h, ws);
    }
}

void kern_drv_delta_net(int isa, cf_env *E, float *o, const float *qkv, const float *ba,
                        const float *A, const float *dt_bias, float *state, int n_k_head,
                        int n_v_head, int d_k, int d_v, float eps, float *scratch, int n_tok,
                        int mode) {
    int chunked = mode == KERN_DN_CHUNKED || (mode == KERN_DN_AUTO && n_tok >= KERN_DN_CHUNK_MIN);
    dn_job j = {kern_ssm_leaves_for(isa), isa_ops(isa), o, qkv, ba, A, dt_bias, state, scratch,
                n_k_head, n_v_head, d_k, d_v, n_tok, chunked, eps, dn_layout_of(d_k, d_v)};
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

