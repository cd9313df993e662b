/*
 * cfk_quant.cuh — the per-thread arithmetic of the CUDA kernels: GGUF block
 * decoding for the weight types the CUDA path computes on (F32, F16, BF16,
 * Q8_0, Q4_0, Q4_K, Q6_K), f16/bf16 conversions, GELU as ggml computes it,
 * SiLU and the RoPE angle.
 *
 * Written in the common subset of C11 and CUDA C++ on purpose (the f16
 * conversions use the device's conversion instructions, exact like the C
 * they replace there): NVRTC
 * compiles it into every model's kernels (cf_cuda.cuh includes it), and the
 * host test suite compiles the very same functions as C and compares them
 * with the CPU kernels, the oracle (tests/test_cuda.c, "cuda_emul/"): every
 * dequantized element must equal runtime/kernels' scalar reference bit for
 * bit.  So: no templates, no CUDA types, no stdint.h (NVRTC has no system
 * headers), unsigned char/short/int for the byte layouts.  Each decoder
 * follows ggml-quants.c dequantize_row_* (via kern_scalar.c /
 * kern_kquants.c) statement by statement, in the same element order and
 * with the same float operations.
 *
 * Layout facts the device code relies on: every block type here starts at
 * an even offset inside a row (Q4_0 18 bytes, Q8_0 34, Q6_K 210, Q4_K 144)
 * and rows of F32 weights are 4-byte aligned, so 16-bit loads of the f16
 * scales are aligned; nothing wider is read from a block.
 *
 * A "unit" is 32 consecutive elements of a row (one Q8_0/Q4_0 block, one
 * Q4_K sub-block, two Q6_K scale groups); a "half" is 16 of them.  All
 * decoders work on halves: cfk_dequant16(type, row, u, hf, v) writes
 * elements 32u + 16hf .. +15 of the row.
 */
#ifndef CFK_QUANT_CUH
#define CFK_QUANT_CUH

#if defined(__CUDACC__)
#define CFK_HD __device__ __forceinline__
#else
#include <math.h>
#include <string.h>
#define CFK_HD static inline
#endif

/* ggml type ids (runtime/base/ggml_type.h; the test asserts they match) */
#define CFK_T_F32 0
#define CFK_T_F16 1
#define CFK_T_Q4_0 2
#define CFK_T_Q8_0 8
#define CFK_T_Q4_K 12
#define CFK_T_Q6_K 14
#define CFK_T_BF16 30

/* 1 for the types the CUDA kernels decode. */
#define CFK_TYPE_SUPPORTED(t)                                                                   \
    ((t) == CFK_T_F32 || (t) == CFK_T_F16 || (t) == CFK_T_BF16 || (t) == CFK_T_Q8_0 ||          \
     (t) == CFK_T_Q4_0 || (t) == CFK_T_Q4_K || (t) == CFK_T_Q6_K)
/* 1 for the types whose rows may end in a partial unit (any row length);
 * the block types need n % 32 (Q8_0, Q4_0) or n % 256 (K-quants) == 0. */
#define CFK_TYPE_PLAIN(t) ((t) == CFK_T_F32 || (t) == CFK_T_F16 || (t) == CFK_T_BF16)

/* Bytes of a row of n elements of type t (0 for other types). */
CFK_HD unsigned long cfk_row_bytes(int t, long n) {
    switch (t) {
    case CFK_T_F32: return (unsigned long)n * 4u;
    case CFK_T_F16: case CFK_T_BF16: return (unsigned long)n * 2u;
    case CFK_T_Q8_0: return (unsigned long)(n / 32) * 34u;
    case CFK_T_Q4_0: return (unsigned long)(n / 32) * 18u;
    case CFK_T_Q4_K: return (unsigned long)(n / 256) * 144u;
    case CFK_T_Q6_K: return (unsigned long)(n / 256) * 210u;
    default: return 0;
    }
}

/* ---- bit casts and 16-bit floats -------------------------------------------------- */

CFK_HD float cfk_bits_f32(unsigned int u) {
#if defined(__CUDACC__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

CFK_HD unsigned int cfk_f32_bits(float f) {
#if defined(__CUDACC__)
    return __float_as_uint(f);
#else
    unsigned int u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

/* IEEE binary16 -> f32, exact for every input (runtime/base/f16.h).  On the
 * device the conversion instruction (exact too). */
CFK_HD float cfk_f16(unsigned short h) {
#if defined(__CUDA_ARCH__)
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#endif
    unsigned int sign = (unsigned int)(h & 0x8000u) << 16;
    unsigned int ex = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (ex == 0) /* zero or subnormal: man * 2^-24, exact in f32 */
        return cfk_bits_f32(cfk_f32_bits((float)man * 5.9604644775390625e-08f) | sign);
    if (ex == 31) return cfk_bits_f32(sign | 0x7f800000u | (man << 13));
    return cfk_bits_f32(sign | ((ex + 112u) << 23) | (man << 13));
}

/* f32 -> binary16, round to nearest even (runtime/base/f16.h f32_to_f16);
 * on the device the conversion instruction (the same rounding; NaN payloads
 * may differ). */
CFK_HD unsigned short cfk_to_f16(float f) {
#if defined(__CUDA_ARCH__)
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#endif
    unsigned int x = cfk_f32_bits(f);
    unsigned short sign = (unsigned short)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
    if (x >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
    if (x < 0x38800000u) {
        if (x <= 0x33000000u) return sign;
        unsigned int e = x >> 23, m = (x & 0x7fffffu) | 0x800000u;
        unsigned int shift = 126u - e;
        unsigned int r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (unsigned short)(sign | r);
    }
    unsigned int r = (x - 0x38000000u) >> 13, rem = x & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) r++;
    return (unsigned short)(sign | r);
}

CFK_HD float cfk_bf16(unsigned short h) { return cfk_bits_f32((unsigned int)h << 16); }

/* f32 -> bfloat16, round to nearest even, NaN stays NaN (f16.h f32_to_bf16). */
CFK_HD unsigned short cfk_to_bf16(float f) {
    unsigned int x = cfk_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 64);
    return (unsigned short)((x + (0x7fffu + ((x >> 16) & 1))) >> 16);
}

/* A little-endian 16-bit value at p (2-byte aligned on the device). */
CFK_HD unsigned short cfk_u16(const unsigned char *p) {
#if defined(__CUDACC__)
    return *(const unsigned short *)p;
#else
    return (unsigned short)(p[0] | (p[1] << 8));
#endif
}

/* ---- block decoding ----------------------------------------------------------------- */

/* ggml get_scale_min_k4: Q4_K sub-block j's 6-bit scale and min */
CFK_HD void cfk_scale_min_k4(int j, const unsigned char *q, int *d, int *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Elements 32u + 16hf .. +15 of a row of type t into v[16].  The row holds
 * at least 32u + 16hf + 16 elements. */
CFK_HD void cfk_dequant16(int t, const unsigned char *row, int u, int hf, float *v) {
    int i;
    switch (t) {
    case CFK_T_F32: {
        const float *p = (const float *)row + 32 * u + 16 * hf;
        for (i = 0; i < 16; i++) v[i] = p[i];
        break;
    }
    case CFK_T_F16: {
        const unsigned char *p = row + 2 * (32 * u + 16 * hf);
        for (i = 0; i < 16; i++) v[i] = cfk_f16(cfk_u16(p + 2 * i));
        break;
    }
    case CFK_T_BF16: {
        const unsigned char *p = row + 2 * (32 * u + 16 * hf);
        for (i = 0; i < 16; i++) v[i] = cfk_bf16(cfk_u16(p + 2 * i));
        break;
    }
    case CFK_T_Q8_0: { /* d (f16), qs[32] int8: x = q * d */
        const unsigned char *b = row + 34 * u;
        const float d = cfk_f16(cfk_u16(b));
        const signed char *q = (const signed char *)(b + 2) + 16 * hf;
        for (i = 0; i < 16; i++) v[i] = (float)q[i] * d;
        break;
    }
    case CFK_T_Q4_0: { /* d, qs[16]: element j = low nibble of qs[j], j + 16 = high nibble; x = (q - 8) * d */
        const unsigned char *b = row + 18 * u;
        const float d = cfk_f16(cfk_u16(b));
        const unsigned char *q = b + 2;
        for (i = 0; i < 16; i++) v[i] = (float)((hf ? (q[i] >> 4) : (q[i] & 0x0f)) - 8) * d;
        break;
    }
    case CFK_T_Q4_K: { /* d, dmin, scales[12], qs[128]; sub-block j of 32: x = d*sc*q - dmin*m */
        const int sb = u >> 3, j = u & 7;
        const unsigned char *b = row + 144 * sb;
        const float d = cfk_f16(cfk_u16(b)), dmin = cfk_f16(cfk_u16(b + 2));
        const unsigned char *q = b + 16 + 32 * (j >> 1);
        int sc, m;
        cfk_scale_min_k4(j, b + 4, &sc, &m);
        const float d1 = d * (float)sc, m1 = dmin * (float)m;
        for (i = 0; i < 16; i++) {
            const int l = 16 * hf + i;
            v[i] = d1 * (float)((j & 1) ? (q[l] >> 4) : (q[l] & 0xf)) - m1;
        }
        break;
    }
    case CFK_T_Q6_K: { /* ql[128], qh[64], scales[16] int8, d; two halves of 128, quadrants of 32 */
        const int sb = u >> 3, j = u & 7, half = j >> 2, qd = j & 3;
        const unsigned char *b = row + 210 * sb;
        const unsigned char *ql = b + 64 * half, *qh = b + 128 + 32 * half;
        const signed char *sc = (const signed char *)(b + 192) + 8 * half;
        const float d = cfk_f16(cfk_u16(b + 208));
        /* quadrant qd of the half: low (qd 0, 1) or high (2, 3) nibbles of ql[l] (qd even) or
         * ql[l + 32] (odd), 2-bit pair qd of qh[l], scales sc[l / 16 + 2 qd] (ggml's q1..q4) */
        const int lo = (qd & 1) ? 32 : 0, ns = (qd >> 1) * 4, hs = 2 * qd;
        /* l / 16 == hf for the 16 elements of a half; ggml's d * sc * q is (d * sc) * q */
        const float ds = d * (float)sc[hf + 2 * qd];
        for (i = 0; i < 16; i++) {
            const int l = 16 * hf + i;
            const int q = (((ql[l + lo] >> ns) & 0xf) | ((qh[l] >> hs) & 3) << 4) - 32;
            v[i] = ds * (float)q;
        }
        break;
    }
    default:
        for (i = 0; i < 16; i++) v[i] = 0.0f;
        break;
    }
}

/* Element k of a row of a plain type (F32, F16, BF16): the tails of rows
 * whose length is not a multiple of 16.  0 for the block types. */
CFK_HD float cfk_elem(int t, const unsigned char *row, long k) {
    switch (t) {
    case CFK_T_F32: return ((const float *)row)[k];
    case CFK_T_F16: return cfk_f16(cfk_u16(row + 2 * k));
    case CFK_T_BF16: return cfk_bf16(cfk_u16(row + 2 * k));
    default: return 0.0f;
    }
}

/* ---- activations ---------------------------------------------------------------------- */

/* ggml_silu_f32(g) * u (kern_scalar.c kern_sc_swiglu_row) */
CFK_HD float cfk_swiglu(float g, float u) { return g / (1.0f + expf(-g)) * u; }

/* GELU, tanh form, read through F16 like ggml_vec_gelu_f32 (GGML_GELU_FP16,
 * kern_elem.c): the input rounded to f16, gelu of that in f32, the result
 * rounded to f16.  The CPU reads a table built the same way. */
CFK_HD float cfk_gelu(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float xh = cfk_f16(cfk_to_f16(x));
    const float g =
        0.5f * xh * (1.0f + tanhf(0.79788456080286535587989211986876f * xh * (1.0f + 0.044715f * xh * xh)));
    return cfk_f16(cfk_to_f16(g));
}

/* RoPE angle of pair i at position pos: pos * theta_scale^i, formed like
 * ggml_compute_forward_rope_f32 (and kern.c) by i successive float
 * multiplications, so each pair gets the CPU's exact angle. */
CFK_HD float cfk_rope_theta(int pos, float theta_scale, int i) {
    float theta = (float)pos;
    for (int k = 0; k < i; k++) theta *= theta_scale;
    return theta;
}

/* kern.c's yarn_corr_dim (ggml_rope_yarn_corr_dim). */
CFK_HD float cfk_yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * logf(n_ctx_orig / (n_rot * 2 * 3.14159265358979323846f)) / (2 * logf(base));
}

/* cos and sin of pair i at position pos as kern_drv_rope forms them: the
 * angle of cfk_rope_theta, divided by ff[i] (freq factors, or ff NULL),
 * times freq_scale, blended back by YaRN's ramp when ext_factor != 0, and
 * both scaled by attn_factor (YaRN: times 1 + 0.1 ln(1 / freq_scale)).
 * Plain RoPE (ff NULL, freq_scale 1, ext_factor 0, attn_factor 1) is
 * cosf/sinf of cfk_rope_theta exactly. */
CFK_HD void cfk_rope_cs(int pos, int i, int n_rot, float freq_base, float freq_scale, float ext_factor,
                        float attn_factor, float beta_fast, float beta_slow, int n_ctx_orig, const float *ff, float *c,
                        float *s) {
    const float theta_base = cfk_rope_theta(pos, powf(freq_base, -2.0f / (float)n_rot), i);
    const float theta_extrap = ff ? theta_base / ff[i] : theta_base;
    float theta = freq_scale * theta_extrap, mscale = attn_factor;
    if (ext_factor != 0.0f) {
        const float lo = floorf(cfk_yarn_corr_dim(n_rot, n_ctx_orig, beta_fast, freq_base));
        const float hi = ceilf(cfk_yarn_corr_dim(n_rot, n_ctx_orig, beta_slow, freq_base));
        const float c0 = lo > 0 ? lo : 0, c1 = hi < n_rot - 1 ? hi : (float)(n_rot - 1);
        const float y = ((float)i - c0) / fmaxf(0.001f, c1 - c0);
        const float mix = (1 - fminf(1, fmaxf(0, y))) * ext_factor; /* rope_yarn_ramp */
        theta = theta * (1 - mix) + theta_extrap * mix;
        mscale = attn_factor * (1.0f + 0.1f * logf(1.0f / freq_scale));
    }
    *c = cosf(theta) * mscale;
    *s = sinf(theta) * mscale;
}

#endif
