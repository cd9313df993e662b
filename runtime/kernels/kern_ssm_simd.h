/*
 * kern_ssm_simd.h — the SIMD leaves of the recurrent-layer kernels
 * (kern_ssm.h), written once over a small vector vocabulary and compiled
 * twice: kern_ssm_avx2.c (SSM_AVX512 0: 8 floats per ymm) and
 * kern_ssm_avx512.c (SSM_AVX512 1: 16 per zmm).  Included only by those two
 * files; SSM_LEAVES names the kern_ssm_leaves table to define.
 *
 * What vectorises where: the conv runs W channels at once (its taps gathered
 * once per channel block, then a loop over tokens); the scans run over the
 * d_state states of one (head, row); the delta rule over the d_k columns of
 * one state row.  Remainders (widths that are not a multiple of W) take the
 * same formula in scalar code.  Results differ from the scalar reference
 * only by FMA contraction, summation order and the polynomial exp (a few ulp).
 */
#include <immintrin.h>
#include <math.h>

#include "kern_ssm.h"

#define UNROLL8 _Pragma("GCC unroll 8")

#if SSM_AVX512
typedef __m512 V;
#define W 16
#define VLOAD(p) _mm512_loadu_ps(p)
#define VSTORE(p, v) _mm512_storeu_ps(p, v)
#define VSET1(x) _mm512_set1_ps(x)
#define VZERO() _mm512_setzero_ps()
#define VADD(a, b) _mm512_add_ps(a, b)
#define VSUB(a, b) _mm512_sub_ps(a, b)
#define VMUL(a, b) _mm512_mul_ps(a, b)
#define VDIV(a, b) _mm512_div_ps(a, b)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VHSUM(v) _mm512_reduce_add_ps(v)
#define VGATHER(base, idx) _mm512_i32gather_ps(idx, base, 4)
typedef __m512i VI;
#define VI_STRIDE(s) _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(s))

/* e^x, Cephes-style: 2^round(x log2 e) times a degree-6 polynomial on the
 * remainder; inf above 88.38, 0 below -87.34 (as expf rounds there). */
static inline V vexp(V x) {
    const V hi = VSET1(88.3762626647949f), lo = VSET1(-87.3365447504f);
    __mmask16 over = _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    V fx = _mm512_roundscale_ps(VMUL(x, VSET1(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V r = _mm512_fnmadd_ps(fx, VSET1(0.693359375f), x);
    r = _mm512_fnmadd_ps(fx, VSET1(-2.12194440e-4f), r);
    V p = VSET1(1.9875691500e-4f);
    p = VFMA(p, r, VSET1(1.3981999507e-3f));
    p = VFMA(p, r, VSET1(8.3334519073e-3f));
    p = VFMA(p, r, VSET1(4.1665795894e-2f));
    p = VFMA(p, r, VSET1(1.6666665459e-1f));
    p = VFMA(p, r, VSET1(5.0000001201e-1f));
    p = VFMA(p, VMUL(r, r), VADD(r, VSET1(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23);
    V res = VMUL(p, _mm512_castsi512_ps(e));
    res = _mm512_mask_blend_ps(over, res, VSET1(INFINITY));
    return _mm512_mask_blend_ps(under, res, VZERO());
}
#else
typedef __m256 V;
#define W 8
#define VLOAD(p) _mm256_loadu_ps(p)
#define VSTORE(p, v) _mm256_storeu_ps(p, v)
#define VSET1(x) _mm256_set1_ps(x)
#define VZERO() _mm256_setzero_ps()
#define VADD(a, b) _mm256_add_ps(a, b)
#define VSUB(a, b) _mm256_sub_ps(a, b)
#define VMUL(a, b) _mm256_mul_ps(a, b)
#define VDIV(a, b) _mm256_div_ps(a, b)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VGATHER(base, idx) _mm256_i32gather_ps(base, idx, 4)
typedef __m256i VI;
#define VI_STRIDE(s) _mm256_mullo_epi32(_mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0), _mm256_set1_epi32(s))

static inline float VHSUM(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* e^x as in the AVX-512 branch (the same polynomial kern_avx2.c uses). */
static inline V vexp(V x) {
    const V hi = VSET1(88.3762626647949f), lo = VSET1(-87.3365447504f);
    V over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ), under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    V fx = _mm256_round_ps(VMUL(x, VSET1(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V r = _mm256_fnmadd_ps(fx, VSET1(0.693359375f), x);
    r = _mm256_fnmadd_ps(fx, VSET1(-2.12194440e-4f), r);
    V p = VSET1(1.9875691500e-4f);
    p = VFMA(p, r, VSET1(1.3981999507e-3f));
    p = VFMA(p, r, VSET1(8.3334519073e-3f));
    p = VFMA(p, r, VSET1(4.1665795894e-2f));
    p = VFMA(p, r, VSET1(1.6666665459e-1f));
    p = VFMA(p, r, VSET1(5.0000001201e-1f));
    p = VFMA(p, VMUL(r, r), VADD(r, VSET1(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    V res = VMUL(p, _mm256_castsi256_ps(e));
    res = _mm256_blendv_ps(res, VSET1(INFINITY), over);
    return _mm256_andnot_ps(under, res);
}
#endif

static inline V vsilu(V v) { return VDIV(v, VADD(VSET1(1.0f), vexp(VSUB(VZERO(), v)))); }
static inline float silu1(float v) { return v / (1.0f + expf(-v)); }

/* ---- ssm_conv: W channels per vector, the taps gathered once per block ------------ */

/* Row j of the window [state; x] (nw state rows). */
static inline const float *win_row(const float *state, const float *x, int n, int nw, int j) {
    return j < nw ? state + (size_t)j * n : x + (size_t)(j - nw) * n;
}

static void simd_conv(float *y, const float *x, const float *w, const float *b, float *state, int n,
                      int c0, int c1, int d_conv, int act, int n_tok) {
    const int nw = d_conv - 1;
    int c = c0;
    for (; c + W <= c1; c += W) {
        V taps[64];
        const VI idx = VI_STRIDE(d_conv);
        for (int i = 0; i < d_conv; i++) taps[i] = VGATHER(w + (size_t)c * d_conv + i, idx);
        const V bias = b ? VLOAD(b + c) : VZERO();
        for (int t = 0; t < n_tok; t++) {
            V acc = VMUL(taps[0], VLOAD(win_row(state, x, n, nw, t) + c));
            for (int i = 1; i < d_conv; i++) acc = VFMA(taps[i], VLOAD(win_row(state, x, n, nw, t + i) + c), acc);
            acc = VADD(acc, bias);
            VSTORE(y + (size_t)t * n + c, act == CF_ACT_SILU ? vsilu(acc) : acc);
        }
        for (int r = 0; r < nw; r++) /* new window (reads ahead of writes) */
            VSTORE(state + (size_t)r * n + c, VLOAD(win_row(state, x, n, nw, n_tok + r) + c));
    }
    for (; c < c1; c++) {
        const float *wc = w + (size_t)c * d_conv;
        for (int t = 0; t < n_tok; t++) {
            float acc = 0.0f;
            for (int i = 0; i < d_conv; i++) acc += wc[i] * win_row(state, x, n, nw, t + i)[c];
            if (b) acc += b[c];
            y[(size_t)t * n + c] = act == CF_ACT_SILU ? silu1(acc) : acc;
        }
        for (int r = 0; r < nw; r++) state[(size_t)r * n + c] = win_row(state, x, n, nw, n_tok + r)[c];
    }
}

/* ---- scans ------------------------------------------------------------------------ */

/* Mamba-2, one head, one token: four rows p at a time, so the four
 * reductions of y[p] are independent chains and B, C are loaded once for them. */
static inline void scan2_rows1(float *s, float xdt, V vdA, float dA, const float *B, const float *C, float *y,
                               int d_state) {
    const V vx = VSET1(xdt);
    V acc = VZERO();
    int i = 0;
    for (; i + W <= d_state; i += W) {
        const V st = VFMA(VLOAD(s + i), vdA, VMUL(VLOAD(B + i), vx));
        acc = VFMA(st, VLOAD(C + i), acc);
        VSTORE(s + i, st);
    }
    float a = VHSUM(acc);
    for (; i < d_state; i++) {
        const float st = s[i] * dA + B[i] * xdt;
        a += st * C[i];
        s[i] = st;
    }
    *y = a;
}

static void simd_scan2(float *S, const float *x, float dt, float dA, const float *B, const float *C,
                       float *y, int head_dim, int d_state) {
    const V vdA = VSET1(dA);
    int p = 0;
    for (; p + 4 <= head_dim && d_state >= W; p += 4) {
        float *s0 = S + (size_t)p * d_state, *s1 = s0 + d_state, *s2 = s1 + d_state, *s3 = s2 + d_state;
        const V x0 = VSET1(x[p] * dt), x1 = VSET1(x[p + 1] * dt), x2 = VSET1(x[p + 2] * dt), x3 = VSET1(x[p + 3] * dt);
        V a0 = VZERO(), a1 = VZERO(), a2 = VZERO(), a3 = VZERO();
        int i = 0;
        for (; i + W <= d_state; i += W) {
            const V b = VLOAD(B + i), c = VLOAD(C + i);
            const V t0 = VFMA(VLOAD(s0 + i), vdA, VMUL(b, x0)), t1 = VFMA(VLOAD(s1 + i), vdA, VMUL(b, x1));
            const V t2 = VFMA(VLOAD(s2 + i), vdA, VMUL(b, x2)), t3 = VFMA(VLOAD(s3 + i), vdA, VMUL(b, x3));
            a0 = VFMA(t0, c, a0), a1 = VFMA(t1, c, a1), a2 = VFMA(t2, c, a2), a3 = VFMA(t3, c, a3);
            VSTORE(s0 + i, t0), VSTORE(s1 + i, t1), VSTORE(s2 + i, t2), VSTORE(s3 + i, t3);
        }
        float r[4] = {VHSUM(a0), VHSUM(a1), VHSUM(a2), VHSUM(a3)};
        float *rows[4] = {s0, s1, s2, s3};
        for (int q = 0; q < 4; q++) {
            const float xdt = x[p + q] * dt;
            for (int ii = i; ii < d_state; ii++) {
                const float st = rows[q][ii] * dA + B[ii] * xdt;
                r[q] += st * C[ii];
                rows[q][ii] = st;
            }
            y[p + q] = r[q];
        }
    }
    for (; p < head_dim; p++) scan2_rows1(S + (size_t)p * d_state, x[p] * dt, vdA, dA, B, C, y + p, d_state);
}

/* Mamba-1, one token, channel by channel (d_state is small: 16). */
static void simd_scan1(float *S, const float *x, const float *dt, const float *A, const float *B,
                       const float *C, float *y, int n_chan, int d_state) {
    for (int c = 0; c < n_chan; c++) {
        float *s = S + (size_t)c * d_state;
        const float *a = A + (size_t)c * d_state;
        const float xdt = x[c] * dt[c];
        const V vx = VSET1(xdt), vdt = VSET1(dt[c]);
        V acc0 = VZERO();
        int i = 0;
        for (; i + W <= d_state; i += W) {
            V st = VFMA(VLOAD(s + i), vexp(VMUL(vdt, VLOAD(a + i))), VMUL(VLOAD(B + i), vx));
            acc0 = VFMA(st, VLOAD(C + i), acc0);
            VSTORE(s + i, st);
        }
        float acc = VHSUM(acc0);
        for (; i < d_state; i++) {
            const float st = s[i] * expf(dt[c] * a[i]) + B[i] * xdt;
            acc += st * C[i];
            s[i] = st;
        }
        y[c] = acc;
    }
}

/* ---- the gated delta rule ------------------------------------------------------------ */

static inline float dot1(const float *a, const float *b, int n) {
    V acc0 = VZERO(), acc1 = VZERO();
    int i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
        acc0 = VFMA(VLOAD(a + i), VLOAD(b + i), acc0);
        acc1 = VFMA(VLOAD(a + i + W), VLOAD(b + i + W), acc1);
    }
    for (; i + W <= n; i += W) acc0 = VFMA(VLOAD(a + i), VLOAD(b + i), acc0);
    float s = VHSUM(VADD(acc0, acc1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Columns per panel of the delta rule and per block of the gemm micro-kernel:
 * NV vectors (AVX-512: 4 zmm, 64 floats; AVX2: 2 ymm, 16 floats), as many
 * accumulators as the registers hold with room for the operands. */
#if SSM_AVX512
#define NV 4
#else
#define NV 2
#endif

/* One head, one token, S (d_k x d_v) in panels of NV·W columns: with the
 * panel's Sᵀk and Sᵀq taken in one pass over its rows (broadcast k[i] and
 * q[i], no reductions), u = β(v − decay·Sᵀk) and o = decay·Sᵀq + u·(k·q);
 * then S = decay·S + k uᵀ over the panel while it is still in L1. */
static void simd_delta(float *S, const float *q, const float *k, const float *v, float decay,
                       float beta, float *o, int d_k, int d_v) {
    const float kq = dot1(k, q, d_k);
    const V vd = VSET1(decay), vb = VSET1(beta), vkq = VSET1(kq);
    int j = 0;
    for (; j + NV * W <= d_v; j += NV * W) {
        V ak[NV], aq[NV], u[NV];
        UNROLL8 for (int b = 0; b < NV; b++) ak[b] = VZERO(), aq[b] = VZERO();
        for (int i = 0; i < d_k; i++) {
            const V ki = VSET1(k[i]), qi = VSET1(q[i]);
            const float *row = S + (size_t)i * d_v + j;
            UNROLL8 for (int b = 0; b < NV; b++) {
                const V x = VLOAD(row + b * W);
                ak[b] = VFMA(ki, x, ak[b]);
                aq[b] = VFMA(qi, x, aq[b]);
            }
        }
        UNROLL8 for (int b = 0; b < NV; b++) {
            u[b] = VMUL(vb, VSUB(VLOAD(v + j + b * W), VMUL(vd, ak[b])));
            VSTORE(o + j + b * W, VFMA(vkq, u[b], VMUL(vd, aq[b])));
        }
        for (int i = 0; i < d_k; i++) {
            const V ki = VSET1(k[i]);
            float *row = S + (size_t)i * d_v + j;
            UNROLL8 for (int b = 0; b < NV; b++) VSTORE(row + b * W, VFMA(ki, u[b], VMUL(vd, VLOAD(row + b * W))));
        }
    }
    for (; j < d_v; j++) { /* remaining columns */
        float sk = 0.0f, sq = 0.0f;
        for (int i = 0; i < d_k; i++) sk += S[(size_t)i * d_v + j] * k[i], sq += S[(size_t)i * d_v + j] * q[i];
        const float uj = (v[j] - decay * sk) * beta;
        o[j] = decay * sq + uj * kq;
        for (int i = 0; i < d_k; i++) S[(size_t)i * d_v + j] = S[(size_t)i * d_v + j] * decay + k[i] * uj;
    }
}

/* x / sqrt(Σx² + eps) · post: the sum of squares in W float lanes, then
 * double (the scalar leaf sums in double; the difference is float rounding). */
static void simd_l2_norm(float *y, const float *x, int d, float eps, float post) {
    V acc = VZERO();
    int i = 0;
    for (; i + W <= d; i += W) {
        const V v = VLOAD(x + i);
        acc = VFMA(v, v, acc);
    }
    double sum = VHSUM(acc);
    for (; i < d; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / d);
    const float scale = 1.0f / sqrtf(mean + eps / (float)d) / sqrtf((float)d) * post;
    const V vs = VSET1(scale);
    for (i = 0; i + W <= d; i += W) VSTORE(y + i, VMUL(VLOAD(x + i), vs));
    for (; i < d; i++) y[i] = x[i] * scale;
}

static void simd_axpby(float *y, float a, const float *x, float b, const float *z, int n) {
    const V va = VSET1(a), vb = VSET1(b);
    int i = 0;
    if (z) {
        for (; i + W <= n; i += W) VSTORE(y + i, VFMA(vb, VLOAD(z + i), VMUL(va, VLOAD(x + i))));
        for (; i < n; i++) y[i] = a * x[i] + b * z[i];
    } else {
        for (; i + W <= n; i += W) VSTORE(y + i, VMUL(va, VLOAD(x + i)));
        for (; i < n; i++) y[i] = a * x[i];
    }
}

/* C (+)= A · B, row-major: blocks of 4 rows x NV·W columns of C held in
 * registers over the whole k loop (broadcast A[r][p], load B[p][block]). */
static void simd_gemm(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int m, int n, int k,
                      float c_scale) {
    const V cs = VSET1(c_scale);
    const int accumulate = c_scale != 0.0f;
    int j = 0;
    for (; j + NV * W <= n; j += NV * W) {
        int i = 0;
        for (; i + 4 <= m; i += 4) {
            V c[4][NV];
            UNROLL8 for (int r = 0; r < 4; r++)
                UNROLL8 for (int b = 0; b < NV; b++)
                    c[r][b] = accumulate ? VMUL(cs, VLOAD(C + (size_t)(i + r) * ldc + j + b * W)) : VZERO();
            for (int p = 0; p < k; p++) {
                V bv[NV];
                UNROLL8 for (int b = 0; b < NV; b++) bv[b] = VLOAD(B + (size_t)p * ldb + j + b * W);
                UNROLL8 for (int r = 0; r < 4; r++) {
                    const V a = VSET1(A[(size_t)(i + r) * lda + p]);
                    UNROLL8 for (int b = 0; b < NV; b++) c[r][b] = VFMA(a, bv[b], c[r][b]);
                }
            }
            UNROLL8 for (int r = 0; r < 4; r++)
                UNROLL8 for (int b = 0; b < NV; b++) VSTORE(C + (size_t)(i + r) * ldc + j + b * W, c[r][b]);
        }
        for (; i < m; i++) {
            V c[NV];
            UNROLL8 for (int b = 0; b < NV; b++)
                c[b] = accumulate ? VMUL(cs, VLOAD(C + (size_t)i * ldc + j + b * W)) : VZERO();
            for (int p = 0; p < k; p++) {
                const V a = VSET1(A[(size_t)i * lda + p]);
                UNROLL8 for (int b = 0; b < NV; b++) c[b] = VFMA(a, VLOAD(B + (size_t)p * ldb + j + b * W), c[b]);
            }
            UNROLL8 for (int b = 0; b < NV; b++) VSTORE(C + (size_t)i * ldc + j + b * W, c[b]);
        }
    }
    for (; j < n; j++) /* remaining columns */
        for (int i = 0; i < m; i++) {
            float acc = accumulate ? c_scale * C[(size_t)i * ldc + j] : 0.0f;
            for (int p = 0; p < k; p++) acc += A[(size_t)i * lda + p] * B[(size_t)p * ldb + j];
            C[(size_t)i * ldc + j] = acc;
        }
}

const kern_ssm_leaves SSM_LEAVES = {
    .conv = simd_conv, .scan2 = simd_scan2, .scan1 = simd_scan1, .delta = simd_delta,
    .l2_norm = simd_l2_norm, .axpby = simd_axpby, .gemm = simd_gemm,
};
