/*
 * kern_rk.c — the row-interleaved K-quant types CF_Q4_K_R8 / CF_Q5_K_R8 /
 * CF_Q6_K_R8 (layouts in kern.h, internals in kern_rk.h): packing one
 * group's super-block from the 8 native blocks and back, the scalar
 * reference gemm leaves, and the f32-activation helpers kern.c's matmul
 * asks for (which unpack to native blocks and run the native leaves).
 * Repacking whole matrices and the integer driver are kern_rk_mm.c.
 */
#include "kern_rk.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "base/f16.h"
#include "kern_r8.h"

static_assert(KERN_Q4_K_R8_BLOCK == 8 * sizeof(kern_block_q4_k), "Q4_K_R8 super-block = 8 Q4_K blocks");
static_assert(KERN_Q5_K_R8_BLOCK == 8 * sizeof(kern_block_q5_k), "Q5_K_R8 super-block = 8 Q5_K blocks");
static_assert(KERN_Q6_K_R8_BLOCK == 8 * sizeof(kern_block_q6_k), "Q6_K_R8 super-block = 8 Q6_K blocks");
static_assert(KERN_IQ4_XS_R8_BLOCK == 8 * sizeof(kern_block_iq4_xs), "IQ4_XS_R8 super-block = 8 IQ4_XS blocks");
static_assert(KERN_RK_NTYPES == CF_IQ4_XS_R8 - CF_Q4_K_R8 + 1, "one leaf slot per RK type");
static_assert(sizeof(kern_block_q8_k) == 292, "kern_block_q8_k: f32 d, 256 qs, 16 bsums");

/* ==== pack / unpack ================================================================== */

/* ggml get_scale_min_k4 / its inverse: sub-block j's 6-bit scale and min in
 * the 12 packed bytes */
static void scales_get(const uint8_t *q, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}
static void scales_put(uint8_t *q, const int sc[8], const int m[8]) {
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        q[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
}

/* chunk layout: bytes 4c..4c+3 of a row's 32-byte run -> byte 4r+i of chunk c */
static void chunks_put(uint8_t *dst, int r, const uint8_t *src, int n_chunks) {
    for (int c = 0; c < n_chunks; c++) memcpy(dst + 32 * c + 4 * r, src + 4 * c, 4);
}
static void chunks_get(uint8_t *dst, int r, const uint8_t *src, int n_chunks) {
    for (int c = 0; c < n_chunks; c++) memcpy(dst + 4 * c, src + 32 * c + 4 * r, 4);
}

/* Q4_K/Q5_K common part: d, dmin, scales, qs */
static void pack_q4k_part(uint8_t *blk, int r, const uint8_t *d2, const uint8_t *scales, const uint8_t *qs) {
    memcpy(blk + 2 * r, d2, 2);
    memcpy(blk + 16 + 2 * r, d2 + 2, 2);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        scales_get(scales, j, &sc, &m);
        blk[32 + 8 * j + r] = (uint8_t)((sc & 15) | (m & 15) << 4);
        uint8_t *h = blk + 96 + 8 * (j / 2) + r;
        const int v = (sc >> 4) | (m >> 4) << 2;
        *h = (uint8_t)((j & 1) ? (*h & 0x0f) | v << 4 : (*h & 0xf0) | v);
    }
    for (int p = 0; p < 4; p++) chunks_put(blk + 128 + 256 * p, r, qs + 32 * p, 8);
}
static void unpack_q4k_part(const uint8_t *blk, int r, uint8_t *d2, uint8_t *scales, uint8_t *qs) {
    memcpy(d2, blk + 2 * r, 2);
    memcpy(d2 + 2, blk + 16 + 2 * r, 2);
    int sc[8], m[8];
    for (int j = 0; j < 8; j++) {
        const int lo = blk[32 + 8 * j + r], h = (blk[96 + 8 * (j / 2) + r] >> (4 * (j & 1))) & 15;
        sc[j] = (lo & 15) | (h & 3) << 4;
        m[j] = (lo >> 4) | (h >> 2) << 4;
    }
    scales_put(scales, sc, m);
    for (int p = 0; p < 4; p++) chunks_get(qs + 32 * p, r, blk + 128 + 256 * p, 8);
}

/* Q6_K ql: ggml pairs columns (l, l+64) of each 128-half n in one byte
 * (ql[64n + l]), RK pairs (l, l+32) of each 64-column pair p = 2n + h
 * (byte 32p + l, l < 32): low nibble column 64p + l = ggml ql[64n + l]'s
 * nibble h, high nibble column 64p + 32 + l = ql[64n + 32 + l]'s nibble h.
 * Byte loops (the compiler vectorizes them): the repack runs at load. */
static void ql_to_rk(const uint8_t *ql, uint8_t *out) {
    for (int n = 0; n < 2; n++)
        for (int l = 0; l < 32; l++) {
            const uint8_t a = ql[64 * n + l], b = ql[64 * n + 32 + l];
            out[64 * n + l] = (uint8_t)((a & 15) | (b & 15) << 4);
            out[64 * n + 32 + l] = (uint8_t)((a >> 4) | (b & 0xf0));
        }
}
static void ql_from_rk(const uint8_t *in, uint8_t *ql) {
    for (int n = 0; n < 2; n++)
        for (int l = 0; l < 32; l++) {
            const uint8_t lo = in[64 * n + l], hi = in[64 * n + 32 + l];
            ql[64 * n + l] = (uint8_t)((lo & 15) | (hi & 15) << 4);
            ql[64 * n + 32 + l] = (uint8_t)((lo >> 4) | (hi & 0xf0));
        }
}

void kern_rk_pack(int type, const void *const rows[8], uint8_t *blk) {
    memset(blk, 0, (size_t)kern_rk_block_bytes(type));
    for (int r = 0; r < 8; r++) {
        if (type == CF_Q4_K_R8) {
            const kern_block_q4_k *b = rows[r];
            pack_q4k_part(blk, r, (const uint8_t *)&b->d, b->scales, b->qs);
        } else if (type == CF_Q5_K_R8) {
            const kern_block_q5_k *b = rows[r];
            pack_q4k_part(blk, r, (const uint8_t *)&b->d, b->scales, b->qs);
            chunks_put(blk + 1152, r, b->qh, 8);
        } else if (type == CF_Q6_K_R8) {
            const kern_block_q6_k *b = rows[r];
            memcpy(blk + 2 * r, &b->d, 2);
            for (int k = 0; k < 8; k++)
                for (int e = 0; e < 2; e++) blk[16 + 16 * k + 2 * r + e] = (uint8_t)b->scales[2 * k + e];
            uint8_t ql[128];
            ql_to_rk(b->ql, ql);
            for (int p = 0; p < 4; p++) chunks_put(blk + 144 + 256 * p, r, ql + 32 * p, 8);
            for (int h = 0; h < 2; h++) chunks_put(blk + 1168 + 256 * h, r, b->qh + 32 * h, 8);
        } else if (type == CF_IQ4_XS_R8) {
            const kern_block_iq4_xs *b = rows[r];
            memcpy(blk + 2 * r, &b->d, 2);
            memcpy(blk + 16 + 2 * r, &b->scales_h, 2);
            for (int p = 0; p < 4; p++) blk[32 + 8 * p + r] = b->scales_l[p];
            chunks_put(blk + 64, r, b->qs, 32);
        }
    }
}

void kern_rk_unpack(int type, const uint8_t *blk, int r, void *row_block) {
    if (type == CF_Q4_K_R8) {
        kern_block_q4_k *b = row_block;
        unpack_q4k_part(blk, r, (uint8_t *)&b->d, b->scales, b->qs);
    } else if (type == CF_Q5_K_R8) {
        kern_block_q5_k *b = row_block;
        unpack_q4k_part(blk, r, (uint8_t *)&b->d, b->scales, b->qs);
        chunks_get(b->qh, r, blk + 1152, 8);
    } else if (type == CF_Q6_K_R8) {
        kern_block_q6_k *b = row_block;
        memcpy(&b->d, blk + 2 * r, 2);
        for (int k = 0; k < 8; k++)
            for (int e = 0; e < 2; e++) b->scales[2 * k + e] = (int8_t)blk[16 + 16 * k + 2 * r + e];
        uint8_t ql[128];
        for (int p = 0; p < 4; p++) chunks_get(ql + 32 * p, r, blk + 144 + 256 * p, 8);
        ql_from_rk(ql, b->ql);
        for (int h = 0; h < 2; h++) chunks_get(b->qh + 32 * h, r, blk + 1168 + 256 * h, 8);
    } else if (type == CF_IQ4_XS_R8) {
        kern_block_iq4_xs *b = row_block;
        memcpy(&b->d, blk + 2 * r, 2);
        memcpy(&b->scales_h, blk + 16 + 2 * r, 2);
        for (int p = 0; p < 4; p++) b->scales_l[p] = blk[32 + 8 * p + r];
        chunks_get(b->qs, r, blk + 64, 32);
    }
}

/* ==== scalar reference gemm ============================================================ */

static inline float blk_f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return f16_to_f32(h);
}

/* row r's 4- or 5-bit code of column k in a Q4_K_R8 / Q5_K_R8 super-block */
static int q45_code(const uint8_t *blk, int five, int r, int k) {
    const int p = k / 64, l = k % 64, c = (l % 32) / 4, i = l % 4;
    const uint8_t b = blk[128 + 256 * p + 32 * c + 4 * r + i];
    int q = l < 32 ? b & 15 : b >> 4;
    if (five) q |= ((blk[1152 + 32 * ((k % 32) / 4) + 4 * r + (k % 4)] >> (k / 32)) & 1) << 4;
    return q;
}
static void q45_scales(const uint8_t *blk, int r, int j, int *sc, int *m) {
    const int lo = blk[32 + 8 * j + r], h = (blk[96 + 8 * (j / 2) + r] >> (4 * (j & 1))) & 15;
    *sc = (lo & 15) | (h & 3) << 4;
    *m = (lo >> 4) | (h >> 2) << 4;
}
/* row r's 6-bit code (0..63) of column k in a Q6_K_R8 super-block */
static int q6_code(const uint8_t *blk, int r, int k) {
    const int p = k / 64, l = k % 64, c = (l % 32) / 4, i = l % 4;
    const uint8_t b = blk[144 + 256 * p + 32 * c + 4 * r + i];
    const int lo = l < 32 ? b & 15 : b >> 4;
    const int h = (blk[1168 + 256 * (k / 128) + 32 * c + 4 * r + i] >> (2 * ((k % 128) / 32))) & 3;
    return lo | h << 4;
}

/* row r's IQ4_XS_R8 scale ls_j - 32 and codebook value of column k */
static int iq4xs_scale(const uint8_t *blk, int r, int j) {
    const int lo = (blk[32 + 8 * (j / 2) + r] >> (4 * (j & 1))) & 15;
    const int hi = ((blk[16 + 2 * r] | blk[17 + 2 * r] << 8) >> (2 * j)) & 3;
    return (lo | hi << 4) - 32;
}
static int iq4xs_value(const uint8_t *blk, int r, int k) {
    const int g = k / 32, l = k % 32, c = (l % 16) / 4, i = l % 4;
    const uint8_t b = blk[64 + 128 * g + 32 * c + 4 * r + i];
    return kern_iq4nl_values[l < 16 ? b & 15 : b >> 4];
}

static void sc_gemm(int type, const void *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,
                    size_t ldy) {
    const int bb = kern_rk_block_bytes(type);
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < 8; r++) {
            float acc = 0;
            for (int b = 0; b < nb; b++) {
                const uint8_t *blk = (const uint8_t *)wg + (size_t)b * bb;
                const kern_block_q8_k *ab = a + (size_t)t * as + b;
                if (type == CF_IQ4_XS_R8) {
                    int32_t s = 0;
                    for (int j = 0; j < 8; j++) {
                        int32_t d = 0;
                        for (int k = 32 * j; k < 32 * j + 32; k++) d += iq4xs_value(blk, r, k) * ab->qs[k];
                        s += iq4xs_scale(blk, r, j) * d;
                    }
                    acc = fmaf((float)s, blk_f16(blk + 2 * r) * ab->d, acc);
                } else if (type == CF_Q6_K_R8) {
                    int32_t s = 0, o = 0;
                    for (int sb = 0; sb < 16; sb++) {
                        const int sc = (int8_t)blk[16 + 16 * (sb / 2) + 2 * r + (sb & 1)];
                        int32_t d = 0;
                        for (int k = 16 * sb; k < 16 * sb + 16; k++) d += q6_code(blk, r, k) * ab->qs[k];
                        s += sc * d;
                        o += sc * ab->bsums[sb];
                    }
                    acc = fmaf((float)(s - 32 * o), blk_f16(blk + 2 * r) * ab->d, acc);
                } else {
                    int32_t s = 0, mm = 0;
                    for (int j = 0; j < 8; j++) {
                        int sc, m;
                        q45_scales(blk, r, j, &sc, &m);
                        int32_t d = 0;
                        for (int k = 32 * j; k < 32 * j + 32; k++) d += q45_code(blk, type == CF_Q5_K_R8, r, k) * ab->qs[k];
                        s += sc * d;
                        mm += m * (ab->bsums[2 * j] + ab->bsums[2 * j + 1]);
                    }
                    acc = fmaf((float)s, blk_f16(blk + 2 * r) * ab->d, acc);
                    acc = fmaf((float)-mm, blk_f16(blk + 16 + 2 * r) * ab->d, acc);
                }
            }
            y[(size_t)t * ldy + r] = acc;
        }
}
static void sc_gemm_q4k(const void *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y, size_t ldy) {
    sc_gemm(CF_Q4_K_R8, wg, a, as, nb, nt, y, ldy);
}
static void sc_gemm_q5k(const void *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y, size_t ldy) {
    sc_gemm(CF_Q5_K_R8, wg, a, as, nb, nt, y, ldy);
}
static void sc_gemm_q6k(const void *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y, size_t ldy) {
    sc_gemm(CF_Q6_K_R8, wg, a, as, nb, nt, y, ldy);
}

static void sc_gemm_iq4xs(const void *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y, size_t ldy) {
    sc_gemm(CF_IQ4_XS_R8, wg, a, as, nb, nt, y, ldy);
}

static const kern_rk_leaves g_sc_leaves = {{sc_gemm_q4k, sc_gemm_q5k, sc_gemm_q6k, sc_gemm_iq4xs}, {NULL}};

const kern_rk_leaves *kern_rk_scalar_leaves(void) { return &g_sc_leaves; }

const kern_rk_leaves *kern_rk_leaves_for(int impl) {
    switch (impl) {
#if defined(__x86_64__)
    case KERN_R8_AVX2: return &kern_rk_avx2_leaves;
    case KERN_R8_VNNI: return &kern_rk_vnni_leaves;
#endif
#if defined(__aarch64__)
    case KERN_R8_NEON: return &kern_rk_neon_leaves;
    case KERN_R8_DOTPROD: return &kern_rk_dotprod_leaves;
#endif
    default: return &g_sc_leaves;
    }
}

/* ==== f32-activation helpers and whole-matrix dequantization ============================ */

typedef void (*native_deq_fn)(const void *src, float *dst, int n);

static native_deq_fn native_deq(int isa, int type) {
    const int simd = isa == KERN_ISA_SIMD && kern_isa_available(KERN_ISA_SIMD);
    (void)simd;
    switch (type) {
    case CF_Q4_K_R8: return simd ? KERN_SIMD(kern_avx2_dequant_q4_k, kern_sc_dequant_q4_k) : kern_sc_dequant_q4_k;
    case CF_Q5_K_R8: return simd ? KERN_SIMD(kern_avx2_dequant_q5_k, kern_sc_dequant_q5_k) : kern_sc_dequant_q5_k;
    case CF_IQ4_XS_R8:
        return simd ? KERN_SIMD(kern_avx2_dequant_iq4_xs, kern_sc_dequant_iq4_xs) : kern_sc_dequant_iq4_xs;
    default: return simd ? KERN_SIMD(kern_avx2_dequant_q6_k, kern_sc_dequant_q6_k) : kern_sc_dequant_q6_k;
    }
}
void kern_rk_deq_rows(int isa, int type, const void *w, int n_in, int r0, int nr, int k0, int kc,
                      float *dst, size_t ld) {
    const native_deq_fn deq = native_deq(isa, type);
    const int bb = kern_rk_block_bytes(type), nb = n_in / KERN_QK_K;
    _Alignas(32) uint8_t nat[KERN_Q6_K_R8_BLOCK / 8];
    for (int r = 0; r < nr; r++) {
        const uint8_t *grp = (const uint8_t *)w + (size_t)((r0 + r) / 8) * nb * bb;
        for (int k = k0; k < k0 + kc; k += KERN_QK_K) {
            kern_rk_unpack(type, grp + (size_t)(k / KERN_QK_K) * bb, (r0 + r) % 8, nat);
            deq(nat, dst + (size_t)r * ld + (k - k0), KERN_QK_K);
        }
    }
}

int kern_rk_dequant(int type, const void *src, int n_rows, int n_cols, float *dst) {
    if (!kern_rk_block_bytes(type) || n_rows <= 0 || n_cols <= 0 || n_rows % 8 || n_cols % KERN_QK_K) return -1;
    const int nb = n_cols / KERN_QK_K, bb = kern_rk_block_bytes(type);
    _Alignas(32) uint8_t nat[KERN_Q6_K_R8_BLOCK / 8];
    for (int row = 0; row < n_rows; row++)
        for (int b = 0; b < nb; b++) {
            kern_rk_unpack(type, (const uint8_t *)src + ((size_t)(row / 8) * nb + b) * bb, row % 8, nat);
            native_deq(KERN_ISA_SCALAR, type)(nat, dst + (size_t)row * n_cols + (size_t)b * KERN_QK_K, KERN_QK_K);
        }
    return 0;
}
