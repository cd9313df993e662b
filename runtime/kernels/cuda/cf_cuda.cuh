/*
 * cf_cuda.cuh — the CUDA kernels of cinfer, as templates the generated
 * forward pass (templates/forward.cu.in, ops.cu.in) instantiates with every
 * dimension of the model: one `extern "C" __global__` wrapper per op calls
 * one of the cfk_* bodies below.  NVRTC compiles the result at load for the
 * GPU's compute capability (compiler/compile.c); this file, cfk_quant.cuh
 * and cfk_geom.h are embedded in the binary and handed to NVRTC as headers.
 *
 * What lives here and how it maps to the CPU kernels (runtime/kernels/, the
 * oracle; numerics differ only by float summation order and, on the tiled
 * path, by f16/bf16 operands):
 *   cfk_get_rows     get_rows: one block per token, any weight type
 *   cfk_mv           matmul for up to CFK_MV_MAX_T tokens: one warp per output
 *                    row, 16-element halves decoded once and dotted with every
 *                    token, f32 accumulation (memory-bound decode path)
 *   cfk_mm           matmul for prompt batches: 64x64 tiles in shared memory,
 *                    weights decoded to f16 (bf16 for BF16 weights),
 *                    mma.sync.m16n8k16 with f32 accumulators on sm_80+; f32
 *                    tiles with FMAs on older GPUs and for F32 weights (so
 *                    that F32 models keep f32 accuracy)
 *   cfk_rms_norm, cfk_layer_norm   one block per row (rms_norm's weight may be null)
 *   cfk_rope         one thread per rotated pair, ggml's angle (cfk_rope_cs: freq
 *                    factors, freq_scale, YaRN, attn_factor as kern_drv_rope)
 *   cfk_kv_store, cfk_att_decode + cfk_att_combine (split-K), cfk_att_prefill
 *                    (flash-style, online softmax), causal, GQA, sliding
 *                    window, soft-capping, over an f32 KV cache
 *   elementwise      add, add_row, scale, swiglu, gelu, geglu, copy_cols,
 *                    mul, relu_sqr, mul_row, pos_log_scale, logits post-processing
 *
 * Needs templates/prelude_cuda.h (cf_cuda_env) before it.  Only CUDA
 * built-ins NVRTC provides without headers are used (threadIdx, __syncthreads,
 * __shfl_xor_sync, __shfl_sync, expf, tanhf, ...); tests/cuda/clang_decls.cuh
 * declares them for clang's syntax check.  Inline PTX: mma.sync and the
 * f16/bf16 conversions (cvt).
 */
#ifndef CF_CUDA_CUH
#define CF_CUDA_CUH

#include "cfk_geom.h"
#include "cfk_quant.cuh"

static_assert(sizeof(cf_cuda_env) == 8 * sizeof(void *) + 6 * sizeof(int),
              "cf_cuda_env: the host and the device must agree on its layout");
static_assert(sizeof(cf_cuda_args) == 6 * sizeof(void *) + 2 * sizeof(int),
              "cf_cuda_args: the host and the device must agree on its layout");

#define CFK_NEG_INF (-__int_as_float(0x7f800000))

/* ---- reductions ----------------------------------------------------------------------- */

__device__ __forceinline__ float cfk_warp_sum(float v) {
    for (int o = CFK_WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float cfk_warp_max(float v) {
    for (int o = CFK_WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over a block of NT threads (a multiple of 32), returned to every thread. */
template <int NT>
__device__ __forceinline__ float cfk_block_sum(float v) {
    __shared__ float part[NT / CFK_WARP];
    __shared__ float total;
    const int lane = threadIdx.x % CFK_WARP, warp = threadIdx.x / CFK_WARP;
    v = cfk_warp_sum(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < NT / CFK_WARP ? part[lane] : 0.0f;
        v = cfk_warp_sum(v);
        if (lane == 0) total = v;
    }
    __syncthreads();
    return total;
}

/* ---- get_rows ------------------------------------------------------------------------- */

/* y (T, N) = rows ids[t] of w as f32; POS: ids are positions pos + t (learned
 * position embeddings), else E->tokens.  grid (T), block CFK_EW_THREADS. */
template <int TYPE, int N, int POS>
__device__ void cfk_get_rows(const cf_cuda_env *E, float *y, const void *w) {
    const int t = blockIdx.x;
    const int id = POS ? E->pos + t : E->tokens[t];
    const unsigned char *row = (const unsigned char *)w + (unsigned long)id * cfk_row_bytes(TYPE, N);
    float *yr = y + (unsigned long)t * N;
    for (int h = threadIdx.x; h < (N + 15) / 16; h += blockDim.x) {
        const int k0 = 16 * h;
        float v[16];
        if (k0 + 16 <= N) cfk_dequant16(TYPE, row, h >> 1, h & 1, v);
        else
            for (int i = 0; i < 16; i++) v[i] = k0 + i < N ? cfk_elem(TYPE, row, k0 + i) : 0.0f;
        for (int i = 0; i < 16; i++)
            if (k0 + i < N) yr[k0 + i] = v[i];
    }
}

/* ---- matvec ----------------------------------------------------------------------------- */

/* y (n_tok, N_OUT) = x (n_tok, N_IN) . W^T for n_tok <= CFK_MV_MAX_T.  Warp w
 * of block b computes row b * CFK_MV_ROWS + w; lane l decodes halves l, l+32,
 * ... of it once and dots each with every token's x.
 * grid (ceil(N_OUT / CFK_MV_ROWS)), block CFK_MV_THREADS. */
template <int TYPE, int N_OUT, int N_IN>
__device__ __noinline__ void cfk_mv(float *y, const float *x, const void *w, int n_tok) {
    const int lane = threadIdx.x % CFK_WARP;
    const int row = blockIdx.x * CFK_MV_ROWS + threadIdx.x / CFK_WARP;
    if (row >= N_OUT) return; /* the whole warp */
    const unsigned char *wr = (const unsigned char *)w + (unsigned long)row * cfk_row_bytes(TYPE, N_IN);
    float acc[CFK_MV_MAX_T];
    for (int t = 0; t < CFK_MV_MAX_T; t++) acc[t] = 0.0f;
    for (int h = lane; h < N_IN / 16; h += CFK_WARP) {
        float v[16];
        cfk_dequant16(TYPE, wr, h >> 1, h & 1, v);
        for (int t = 0; t < CFK_MV_MAX_T; t++) {
            if (t >= n_tok) break;
            const float *xt = x + (unsigned long)t * N_IN + 16 * h;
            float s = 0.0f;
            for (int i = 0; i < 16; i++) s += v[i] * xt[i];
            acc[t] += s;
        }
    }
    if (N_IN % 16) { /* plain types only: the rest of the row, one element per lane */
        const int k = N_IN / 16 * 16 + lane;
        if (k < N_IN) {
            const float wv = cfk_elem(TYPE, wr, k);
            for (int t = 0; t < CFK_MV_MAX_T; t++)
                if (t < n_tok) acc[t] += wv * x[(unsigned long)t * N_IN + k];
        }
    }
    for (int t = 0; t < CFK_MV_MAX_T; t++) {
        if (t >= n_tok) break; /* uniform over the warp */
        const float s = cfk_warp_sum(acc[t]);
        if (lane == 0) y[(unsigned long)t * N_OUT + row] = s;
    }
}

/* ---- tiled matmul ------------------------------------------------------------------------ */

/* mma.sync m16n8k16, row.col, f32 accumulators (PTX ISA 7.0+, sm_80+):
 * a = 4 registers of two f16 (bf16) each, b = 2, c = 4 floats, in place. */
__device__ __forceinline__ void cfk_mma_f16(float *c, const unsigned int *a, const unsigned int *b) {
#if defined(CFK_EMU_MMA)
    cfk_emu_mma(c, a, b, 0);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    (void)c, (void)a, (void)b; /* never called below sm_80 */
#endif
}

__device__ __forceinline__ void cfk_mma_bf16(float *c, const unsigned int *a, const unsigned int *b) {
#if defined(CFK_EMU_MMA)
    cfk_emu_mma(c, a, b, 1);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    (void)c, (void)a, (void)b; /* never called below sm_80 */
#endif
}

/* CFK_EMU_MMA: the host emulation of the tests (tests/cuda/emu.h) runs the
 * tensor-core path with a software mma.sync. */
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(CFK_EMU_MMA)
#define CFK_MMA 1 /* tensor cores: mma.sync m16n8k16 */
#else
#define CFK_MMA 0
#endif

/* Two floats as one word of two f16 (bf16): lo in the low half, as mma.sync
 * reads a row's consecutive elements (cvt.rn.f16x2.f32 d, a, b puts a high). */
template <bool BF>
__device__ __forceinline__ unsigned int cfk_pack2(float lo, float hi) {
    unsigned int r = 0;
#if CFK_MMA && !defined(CFK_EMU_MMA)
    if (BF) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    r = (unsigned int)(BF ? cfk_to_bf16(lo) : cfk_to_f16(lo)) | (unsigned int)(BF ? cfk_to_bf16(hi) : cfk_to_f16(hi)) << 16;
#endif
    return r;
}

/* Tile words: F32 tiles (F32 weights, and every type without tensor cores)
 * hold one float per word, the others two 16-bit values. */
template <bool F32, bool BF>
__device__ __forceinline__ void cfk_tile_put16(unsigned int *rowp, int c0, const float *v) {
    if (F32) {
        for (int i = 0; i < 16; i++) rowp[c0 + i] = cfk_f32_bits(v[i]);
    } else {
        for (int i = 0; i < 16; i += 2) rowp[(c0 + i) / 2] = cfk_pack2<BF>(v[i], v[i + 1]);
    }
}

/* y (n_tok, N_OUT) = x (n_tok, N_IN) . W^T.  Block (bx, by): tokens
 * by*BM.., outputs bx*BN..; warp w owns the 32x32 sub-tile (w / 2, w % 2);
 * thread (g = lane / 4, q = lane % 4) owns, per 16x8 mma tile, rows g and
 * g + 8 and columns 2q, 2q + 1 (the mma.sync accumulator layout, which the
 * FMA path shares).  grid (ceil(N_OUT / BN), ceil(n_tok / BM)), block 128. */
template <int TYPE, int N_OUT, int N_IN>
__device__ __noinline__ void cfk_mm(float *y, const float *x, const void *w, int n_tok) {
    constexpr int BM = CFK_MM_BM, BN = CFK_MM_BN, BK = CFK_MM_BK;
    constexpr bool F32 = TYPE == CFK_T_F32 || !CFK_MMA, BF = TYPE == CFK_T_BF16;
    constexpr int LD = F32 ? BK + 1 : (BK + 8) / 2; /* row stride in words: padded against bank conflicts */
    static_assert(BK == 32 && CFK_MM_THREADS == 2 * BM && BM == BN, "one row half per thread per k-step");
    __shared__ unsigned int xs[BM * LD], ws[BN * LD];
    const int tid = threadIdx.x, lane = tid % CFK_WARP, warp = tid / CFK_WARP;
    const int g = lane / 4, q = lane % 4;
    const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
    const int t0 = blockIdx.y * BM, o0 = blockIdx.x * BN;
    const unsigned long rb = cfk_row_bytes(TYPE, N_IN);
    float acc[2][4][4];
    for (int m = 0; m < 2; m++)
        for (int n = 0; n < 4; n++)
            for (int e = 0; e < 4; e++) acc[m][n][e] = 0.0f;

    for (int k0 = 0; k0 < N_IN; k0 += BK) {
        { /* x: row tid / 2, columns (tid % 2) * 16 .. +15, zero past the edges */
            const int r = tid / 2, c0 = (tid % 2) * 16, t = t0 + r;
            float v[16];
            for (int i = 0; i < 16; i++) {
                const int k = k0 + c0 + i;
                v[i] = t < n_tok && k < N_IN ? x[(unsigned long)t * N_IN + k] : 0.0f;
            }
            cfk_tile_put16<F32, BF>(xs + r * LD, c0, v);
        }
        { /* W: row tid / 2, half tid % 2 of the unit k0 / 32 */
            const int r = tid / 2, hf = tid % 2, o = o0 + r, k = k0 + 16 * hf;
            const unsigned char *wr = (const unsigned char *)w + (unsigned long)(o < N_OUT ? o : 0) * rb;
            float v[16];
            if (o < N_OUT && k + 16 <= N_IN) cfk_dequant16(TYPE, wr, k0 / 32, hf, v);
            else
                for (int i = 0; i < 16; i++) v[i] = o < N_OUT && k + i < N_IN ? cfk_elem(TYPE, wr, k + i) : 0.0f;
            cfk_tile_put16<F32, BF>(ws + r * LD, 16 * hf, v);
        }
        __syncthreads();
#if CFK_MMA
        if (!F32) {
            for (int ks = 0; ks < BK; ks += 16) {
                unsigned int a[2][4], b[4][2];
                for (int m = 0; m < 2; m++) {
                    const unsigned int *r0 = xs + (wm + m * 16 + g) * LD, *r1 = r0 + 8 * LD;
                    a[m][0] = r0[(ks + 2 * q) / 2];
                    a[m][1] = r1[(ks + 2 * q) / 2];
                    a[m][2] = r0[(ks + 8 + 2 * q) / 2];
                    a[m][3] = r1[(ks + 8 + 2 * q) / 2];
                }
                for (int n = 0; n < 4; n++) {
                    const unsigned int *r0 = ws + (wn + n * 8 + g) * LD;
                    b[n][0] = r0[(ks + 2 * q) / 2];
                    b[n][1] = r0[(ks + 8 + 2 * q) / 2];
                }
                for (int m = 0; m < 2; m++)
                    for (int n = 0; n < 4; n++) {
                        if (BF) cfk_mma_bf16(acc[m][n], a[m], b[n]);
                        else cfk_mma_f16(acc[m][n], a[m], b[n]);
                    }
            }
        } else
#endif
        {
            for (int kk = 0; kk < BK; kk++) { /* F32 tiles here */
                float xv[2][2], wv[4][2];
                for (int m = 0; m < 2; m++)
                    for (int h = 0; h < 2; h++) xv[m][h] = cfk_bits_f32(xs[(wm + m * 16 + g + 8 * h) * LD + kk]);
                for (int n = 0; n < 4; n++)
                    for (int c = 0; c < 2; c++) wv[n][c] = cfk_bits_f32(ws[(wn + n * 8 + 2 * q + c) * LD + kk]);
                for (int m = 0; m < 2; m++)
                    for (int n = 0; n < 4; n++)
                        for (int e = 0; e < 4; e++) acc[m][n][e] += xv[m][e / 2] * wv[n][e % 2];
            }
        }
        __syncthreads();
    }
    for (int m = 0; m < 2; m++)
        for (int n = 0; n < 4; n++)
            for (int e = 0; e < 4; e++) {
                const int t = t0 + wm + m * 16 + g + 8 * (e / 2), o = o0 + wn + n * 8 + 2 * q + e % 2;
                if (t < n_tok && o < N_OUT) y[(unsigned long)t * N_OUT + o] = acc[m][n][e];
            }
}

/* ---- norms ---------------------------------------------------------------------------------- */

/* y = x / sqrt(mean(x^2) + eps) * w over rows of N (kern_sc_rms_norm_row:
 * v = x * scale, then v * w).  grid (rows), block CFK_ROW_THREADS. */
template <int N>
__device__ void cfk_rms_norm(float *y, const float *x, const float *w, float eps) {
    const float *xr = x + (unsigned long)blockIdx.x * N;
    float *yr = y + (unsigned long)blockIdx.x * N;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < N; i += CFK_ROW_THREADS) ss += xr[i] * xr[i];
    ss = cfk_block_sum<CFK_ROW_THREADS>(ss);
    const float scale = 1.0f / sqrtf(ss / N + eps);
    for (int i = threadIdx.x; i < N; i += CFK_ROW_THREADS) yr[i] = w ? (xr[i] * scale) * w[i] : xr[i] * scale;
}

/* y = (x - mean) / sqrt(var + eps) * w + b (kern_layer_norm; b may be null). */
template <int N>
__device__ void cfk_layer_norm(float *y, const float *x, const float *w, const float *b, float eps) {
    const float *xr = x + (unsigned long)blockIdx.x * N;
    float *yr = y + (unsigned long)blockIdx.x * N;
    float s = 0.0f;
    for (int i = threadIdx.x; i < N; i += CFK_ROW_THREADS) s += xr[i];
    const float mean = cfk_block_sum<CFK_ROW_THREADS>(s) / N;
    float s2 = 0.0f;
    for (int i = threadIdx.x; i < N; i += CFK_ROW_THREADS) s2 += (xr[i] - mean) * (xr[i] - mean);
    const float scale = 1.0f / sqrtf(cfk_block_sum<CFK_ROW_THREADS>(s2) / N + eps);
    for (int i = threadIdx.x; i < N; i += CFK_ROW_THREADS)
        yr[i] = (xr[i] - mean) * scale * w[i] + (b ? b[i] : 0.0f);
}

/* ---- rope ----------------------------------------------------------------------------------------- */

/* In place on x (T, N_HEAD * HEAD_DIM): pair i of head blockIdx.y of token
 * blockIdx.x rotated by pos * freq_base^(-2i / N_ROT), with freq factors ff
 * (N_ROT / 2, or NULL) and YaRN as cfk_rope_cs; MODE 0 pairs (2i, 2i+1)
 * (norm), 2 pairs (i, i + N_ROT/2) (neox).  block CFK_ROPE_THREADS(N_ROT). */
template <int N_HEAD, int HEAD_DIM, int N_ROT, int MODE>
__device__ void cfk_rope(const cf_cuda_env *E, float *x, const float *ff, float freq_base, float freq_scale,
                         float ext_factor, float attn_factor, float beta_fast, float beta_slow, int n_ctx_orig) {
    const int t = blockIdx.x, h = blockIdx.y, i = threadIdx.x;
    if (i >= N_ROT / 2) return;
    float c, s;
    cfk_rope_cs(E->pos + t, i, N_ROT, freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow,
                n_ctx_orig, ff, &c, &s);
    float *hx = x + ((unsigned long)t * N_HEAD + h) * HEAD_DIM;
    const int i0 = MODE == 2 ? i : 2 * i, i1 = MODE == 2 ? i + N_ROT / 2 : 2 * i + 1;
    const float x0 = hx[i0], x1 = hx[i1];
    hx[i0] = x0 * c - x1 * s;
    hx[i1] = x0 * s + x1 * c;
}

/* ---- attention -------------------------------------------------------------------------------- */

/* k, v (T, KV_DIM) into the cache of `layer` at positions pos.. pos+T-1.
 * grid (T), block CFK_EW_THREADS. */
template <int KV_DIM>
__device__ void cfk_kv_store(const cf_cuda_env *E, int layer, const float *k, const float *v) {
    const int t = blockIdx.x;
    float *kc = E->kv_k[layer] + (unsigned long)(E->pos + t) * KV_DIM;
    float *vc = E->kv_v[layer] + (unsigned long)(E->pos + t) * KV_DIM;
    for (int j = threadIdx.x; j < KV_DIM; j += blockDim.x) {
        kc[j] = k[(unsigned long)t * KV_DIM + j];
        vc[j] = v[(unsigned long)t * KV_DIM + j];
    }
}

/* The keys query position p sees: [p0, p_end). */
__device__ __forceinline__ void cfk_att_range(int p, int window, int *p0, int *p_end) {
    *p_end = p + 1;
    *p0 = window > 0 && *p_end > window ? *p_end - window : 0;
}

__device__ __forceinline__ float cfk_att_cap(float s, float softcap) {
    return softcap > 0.0f ? tanhf(s * (1.0f / softcap)) * softcap : s;
}

#define CFK_HD_SLOTS(hd) (((hd) + CFK_WARP - 1) / CFK_WARP) /* head dims per lane */

/* Decode (one token): split blockIdx.y of the cache for query head
 * blockIdx.x: positions [split * CFK_ATT_SPLIT, +CFK_ATT_SPLIT) within the
 * causal (and window) range.  Each warp takes every 4th key: lanes split the
 * head dimension, the dot is a warp sum, softmax online; the 4 warps merge in
 * shared memory into (max, sum, out[HD]) at scratch[(h * splits + split) *
 * CFK_ATT_PARTIAL(HD)].  An empty split writes max -inf, sum 0.
 * grid (N_HEAD, att_splits), block CFK_ATT_THREADS. */
template <int N_HEAD, int N_HEAD_KV, int HD, int WINDOW>
__device__ __noinline__ void cfk_att_decode(const cf_cuda_env *E, int layer, const float *q, float scale,
                                            float softcap) {
    constexpr int KV_DIM = N_HEAD_KV * HD, NS = CFK_HD_SLOTS(HD), NW = CFK_ATT_THREADS / CFK_WARP;
    const int h = blockIdx.x, split = blockIdx.y, lane = threadIdx.x % CFK_WARP, warp = threadIdx.x / CFK_WARP;
    const int kvh = h / (N_HEAD / N_HEAD_KV);
    int p0, p_end;
    cfk_att_range(E->pos, WINDOW, &p0, &p_end);
    const int lo = p0 > split * CFK_ATT_SPLIT ? p0 : split * CFK_ATT_SPLIT;
    const int hi = p_end < (split + 1) * CFK_ATT_SPLIT ? p_end : (split + 1) * CFK_ATT_SPLIT;
    float *part = E->scratch + ((unsigned long)h * E->att_splits + split) * CFK_ATT_PARTIAL(HD);
    const float *kc = E->kv_k[layer] + kvh * HD, *vc = E->kv_v[layer] + kvh * HD;
    float qv[NS], o[NS], m = CFK_NEG_INF, l = 0.0f;
    for (int j = 0; j < NS; j++) {
        const int d = lane + CFK_WARP * j;
        qv[j] = d < HD ? q[h * HD + d] : 0.0f;
        o[j] = 0.0f;
    }
    for (int p = lo + warp; p < hi; p += NW) {
        float s = 0.0f;
        for (int j = 0; j < NS; j++) {
            const int d = lane + CFK_WARP * j;
            if (d < HD) s += qv[j] * kc[(unsigned long)p * KV_DIM + d];
        }
        s = cfk_att_cap(cfk_warp_sum(s) * scale, softcap);
        const float m_new = fmaxf(m, s), corr = expf(m - m_new), e = expf(s - m_new);
        l = l * corr + e;
        for (int j = 0; j < NS; j++) {
            const int d = lane + CFK_WARP * j;
            o[j] = o[j] * corr + (d < HD ? e * vc[(unsigned long)p * KV_DIM + d] : 0.0f);
        }
        m = m_new;
    }
    __shared__ float wm[NW], wl[NW], wo[NW][NS * CFK_WARP];
    if (lane == 0) {
        wm[warp] = m;
        wl[warp] = l;
    }
    for (int j = 0; j < NS; j++) wo[warp][lane + CFK_WARP * j] = o[j];
    __syncthreads();
    float M = CFK_NEG_INF;
    for (int w = 0; w < NW; w++) M = fmaxf(M, wm[w]);
    if (threadIdx.x == 0) {
        float L = 0.0f;
        for (int w = 0; w < NW; w++) L += wm[w] == CFK_NEG_INF ? 0.0f : wl[w] * expf(wm[w] - M);
        part[0] = M;
        part[1] = L;
    }
    for (int d = threadIdx.x; d < HD; d += CFK_ATT_THREADS) {
        float O = 0.0f;
        for (int w = 0; w < NW; w++) O += wm[w] == CFK_NEG_INF ? 0.0f : wo[w][d] * expf(wm[w] - M);
        part[2 + d] = O;
    }
}

/* out (N_HEAD * HD) of the one token = the splits of each head merged.
 * grid (N_HEAD), block CFK_ATT_COMBINE_THREADS(HD). */
template <int N_HEAD, int HD>
__device__ void cfk_att_combine(const cf_cuda_env *E, float *out) {
    const int h = blockIdx.x, d = threadIdx.x, n = E->att_splits;
    const float *part = E->scratch + (unsigned long)h * n * CFK_ATT_PARTIAL(HD);
    float M = CFK_NEG_INF;
    for (int s = 0; s < n; s++) M = fmaxf(M, part[s * CFK_ATT_PARTIAL(HD)]);
    if (d >= HD) return;
    float L = 0.0f, O = 0.0f;
    for (int s = 0; s < n; s++) {
        const float *ps = part + s * CFK_ATT_PARTIAL(HD);
        if (ps[0] == CFK_NEG_INF) continue;
        const float c = expf(ps[0] - M);
        L += ps[1] * c;
        O += ps[2 + d] * c;
    }
    out[h * HD + d] = O / L;
}

/* Prompt attention: out (T, N_HEAD * HD) for query head blockIdx.x and the
 * CFK_ATT_Q tokens blockIdx.y * CFK_ATT_Q + warp.  Keys stream through shared
 * memory in tiles of KT (padded rows: lane j reads key j without bank
 * conflicts); lane j scores key j of the tile, the warp keeps a running max
 * and sum (online softmax) and lanes accumulate their head dimensions.
 * grid (N_HEAD, ceil(T / CFK_ATT_Q)), block CFK_ATT_PF_THREADS. */
template <int N_HEAD, int N_HEAD_KV, int HD, int WINDOW>
__device__ __noinline__ void cfk_att_prefill(const cf_cuda_env *E, int layer, float *out, const float *q,
                                             float scale, float softcap) {
    constexpr int KV_DIM = N_HEAD_KV * HD, NS = CFK_HD_SLOTS(HD), KT = CFK_ATT_KT(HD);
    static_assert(HD <= CFK_ATT_MAX_HD, "head_dim above CFK_ATT_MAX_HD");
    __shared__ float ks[KT * (HD + 1)], vs[KT * HD], qs[CFK_ATT_Q][HD];
    const int h = blockIdx.x, lane = threadIdx.x % CFK_WARP, warp = threadIdx.x / CFK_WARP;
    const int kvh = h / (N_HEAD / N_HEAD_KV), T = E->n_tokens, t_first = (int)blockIdx.y * CFK_ATT_Q;
    const int t = t_first + warp, active = t < T;
    const int t_last = t_first + CFK_ATT_Q - 1 < T - 1 ? t_first + CFK_ATT_Q - 1 : T - 1;
    int p0, p_end, blk_lo, blk_hi, unused;
    cfk_att_range(E->pos + (active ? t : t_last), WINDOW, &p0, &p_end);
    cfk_att_range(E->pos + t_first, WINDOW, &blk_lo, &unused);
    cfk_att_range(E->pos + t_last, WINDOW, &unused, &blk_hi);
    const float *kc = E->kv_k[layer] + kvh * HD, *vc = E->kv_v[layer] + kvh * HD;
    for (int d = lane; d < HD; d += CFK_WARP)
        qs[warp][d] = active ? q[((unsigned long)t * N_HEAD + h) * HD + d] : 0.0f;
    float o[NS], m = CFK_NEG_INF, l = 0.0f;
    for (int j = 0; j < NS; j++) o[j] = 0.0f;
    for (int base = blk_lo; base < blk_hi; base += KT) {
        __syncthreads(); /* the previous tile is consumed (and qs written) */
        for (int i = threadIdx.x; i < KT * HD; i += CFK_ATT_PF_THREADS) {
            const int j = i / HD, d = i % HD, p = base + j;
            ks[j * (HD + 1) + d] = p < blk_hi ? kc[(unsigned long)p * KV_DIM + d] : 0.0f;
            vs[j * HD + d] = p < blk_hi ? vc[(unsigned long)p * KV_DIM + d] : 0.0f;
        }
        __syncthreads();
        if (!active) continue; /* the whole warp; it still loads tiles and meets the barriers */
        const int p = base + lane, valid = lane < KT && p >= p0 && p < p_end;
        float s = CFK_NEG_INF;
        if (valid) {
            float dot = 0.0f;
            for (int d = 0; d < HD; d++) dot += qs[warp][d] * ks[lane * (HD + 1) + d];
            s = cfk_att_cap(dot * scale, softcap);
        }
        const float m_new = fmaxf(m, cfk_warp_max(s));
        if (m_new == CFK_NEG_INF) continue; /* no key of this query in the tile yet */
        const float corr = expf(m - m_new), e = valid ? expf(s - m_new) : 0.0f;
        l = l * corr + cfk_warp_sum(e);
        for (int j = 0; j < NS; j++) o[j] *= corr;
        for (int jj = 0; jj < KT; jj++) {
            const float ej = __shfl_sync(0xffffffffu, e, jj);
            for (int j = 0; j < NS; j++) {
                const int d = lane + CFK_WARP * j;
                if (d < HD) o[j] += ej * vs[jj * HD + d];
            }
        }
        m = m_new;
    }
    if (!active) return;
    for (int j = 0; j < NS; j++) {
        const int d = lane + CFK_WARP * j;
        if (d < HD) out[((unsigned long)t * N_HEAD + h) * HD + d] = o[j] / l;
    }
}

/* ---- elementwise (grid ceil(N * T / CFK_EW_THREADS), block CFK_EW_THREADS) ------------------ */

__device__ __forceinline__ int cfk_ew_index(void) { return blockIdx.x * blockDim.x + threadIdx.x; }

template <int N>
__device__ void cfk_add(const cf_cuda_env *E, float *y, const float *a, const float *b) {
    const int i = cfk_ew_index();
    if (i < N * E->n_tokens) y[i] = a[i] + b[i];
}

template <int N>
__device__ void cfk_add_row(const cf_cuda_env *E, float *y, const float *x, const float *b) {
    const int i = cfk_ew_index();
    if (i < N * E->n_tokens) y[i] = x[i] + b[i % N];
}

template <int N>
__device__ void cfk_scale(const cf_cuda_env *E, float *y, const float *x, float s) {
    const int i = cfk_ew_index();
    if (i < N * E->n_tokens) y[i] = x[i] * s;
}

template <int N>
__device__ void cfk_swiglu_op(const cf_cuda_env *E, float *y, const float *g, const float *u) {
    const int i = cfk_ew_index();
    if (i < N * E->n_tokens) y[i] = cfk_swiglu(g[i], u[i]);
}

template <int N>
__device__ void cfk_gelu_op(const cf_cuda_env *E, float *y, const float *x) {
    const int i = cfk_ew_index();
    if (i < N * E->n_tokens) y[i] = cfk_gelu(x[i]);
}

template <int N>
__device__ void cfk_geglu_op(const cf_cuda_env *E, float *y, const float *g, const float *u) {
    const int i = cfk_ew_index();
    if (i < N * E->n_tokens) y[i] = cfk_gelu(g[i]) * u[i];
}

/* Issue-19 ops (kern_elem.c's kern_mul, kern_relu_sqr and kern_mul_row: NW
 * = 1 a scalar weight, else one per column). */
template <int N>
__device__ void cfk_mul(const cf_cuda_env *E, float *y, const float *a, const float *b) {
    const int i = cfk_ew_index();
    if (i < N * E->n_tokens) y[i] = a[i] * b[i];
}

template <int N>
__device__ void cfk_relu_sqr(const cf_cuda_env *E, float *y, const float *x) {
    const int i = cfk_ew_index();
    if (i < N * E->n_tokens) {
        const float r = x[i] > 0.0f ? x[i] : 0.0f;
        y[i] = r * r;
    }
}

template <int N, int NW>
__device__ void cfk_mul_row(const cf_cuda_env *E, float *y, const float *x, const float *w) {
    const int i = cfk_ew_index();
    if (i < N * E->n_tokens) y[i] = x[i] * w[NW == 1 ? 0 : i % N];
}

/* kern_pos_log_scale (mistral3's attention temperature): row t scaled by
 * 1 + scale ln(1 + floor((pos + offset) / FLOOR_SCALE)), the log in double. */
template <int N, int FLOOR_SCALE>
__device__ void cfk_pos_log_scale(const cf_cuda_env *E, float *y, const float *x, float scale, float offset) {
    const int i = cfk_ew_index();
    if (i < N * E->n_tokens) {
        const float pos = (float)(E->pos + i / N);
        y[i] = x[i] * (float)(log(floorf((pos + offset) / (float)FLOOR_SCALE) + 1.0) * scale + 1.0);
    }
}

/* y (T, NY) = columns [COL0, COL0 + NY) of x (T, NX). */
template <int NX, int COL0, int NY>
__device__ void cfk_copy_cols(const cf_cuda_env *E, float *y, const float *x) {
    const int i = cfk_ew_index();
    if (i < NY * E->n_tokens) y[i] = x[(unsigned long)(i / NY) * NX + COL0 + i % NY];
}

/* In place on E->logits (rows, N_VOCAB): *= scale, then c * tanh(l / c) when
 * softcap c > 0 (kern_logits_post).  rows = n_tokens with logits_all, else 1. */
template <int N_VOCAB>
__device__ void cfk_logits_post(const cf_cuda_env *E, const float *bias, float scale, float softcap) {
    const int i = cfk_ew_index();
    if (i >= N_VOCAB * (E->logits_all ? E->n_tokens : 1)) return;
    float l = E->logits[i];
    if (bias) l += bias[i % N_VOCAB];
    l *= scale;
    if (softcap > 0.0f) l = tanhf(l * (1.0f / softcap)) * softcap;
    E->logits[i] = l;
}

#endif
