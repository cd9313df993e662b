/*
 * kern_kquants.h — internal to the kernels (kern.c, kern_kquants.c,
 * kern_kquants_avx2.c): the 256-element "super-block" weight types of ggml —
 * K-quants (Q2_K..Q6_K, Q8_K), IQ4_XS, IQ3_XXS, IQ3_S and the ternary
 * TQ1_0/TQ2_0 — their block layouts, codebooks and leaf functions.
 *
 * Layouts and tables are ggml's (ggml/src/ggml-common.h); the decoding rules
 * are ggml's dequantize_row_* (ggml/src/ggml-quants.c).  They are data from
 * the GGUF format: change nothing here without changing the format.
 * kern_kquants.c static_asserts every block size.
 *
 * Exactness.  Each decoded weight is either an exact product of small
 * integers and the block's f16 scales, or one rounding of such a product
 * (Q2_K/Q4_K/Q5_K: d*sc*q - dmin*m; Q6_K: d*sc*q; IQ4_XS: d*(ls-32)*kv;
 * Q8_K: d*q), so every correct evaluation order gives the same float and the
 * AVX2 dequant leaves are bit-identical to the scalar ones.
 */
#ifndef CINFER_KERN_KQUANTS_H
#define CINFER_KERN_KQUANTS_H

#include <stdint.h>

#define KERN_QK_K 256

/* ggml type ids (gguf.h enum ggml_type; kern_kquants.c asserts they agree). */
enum {
    KERN_T_Q2_K = 10,
    KERN_T_Q3_K = 11,
    KERN_T_Q4_K = 12,
    KERN_T_Q5_K = 13,
    KERN_T_Q6_K = 14,
    KERN_T_Q8_K = 15,
    KERN_T_IQ3_XXS = 18,
    KERN_T_IQ3_S = 21,
    KERN_T_IQ4_XS = 23,
    KERN_T_TQ1_0 = 34,
    KERN_T_TQ2_0 = 35,
};

/* ---- block layouts (ggml-common.h), 256 elements each -------------------- */

/* x = d*(sc&15)*q - dmin*(sc>>4), 16 sub-blocks of 16, q 2 bits */
typedef struct {
    uint8_t scales[KERN_QK_K / 16]; /* low nibble scale, high nibble min */
    uint8_t qs[KERN_QK_K / 4];
    uint16_t d, dmin;               /* f16 */
} kern_block_q2_k;

/* x = d*(sc-32)*(q - 4*!hbit), 16 sub-blocks of 16, 6-bit scales packed in 12 bytes */
typedef struct {
    uint8_t hmask[KERN_QK_K / 8];
    uint8_t qs[KERN_QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
} kern_block_q3_k;

/* x = d*sc*q - dmin*m, 8 sub-blocks of 32, 6-bit sc/m packed in 12 bytes */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[KERN_QK_K / 2];
} kern_block_q4_k;

/* Q4_K plus a fifth bit per element in qh */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[KERN_QK_K / 8];
    uint8_t qs[KERN_QK_K / 2];
} kern_block_q5_k;

/* x = d*sc*(q-32), 16 sub-blocks of 16, q = 4 low bits (ql) | 2 high bits (qh) */
typedef struct {
    uint8_t ql[KERN_QK_K / 2];
    uint8_t qh[KERN_QK_K / 4];
    int8_t scales[KERN_QK_K / 16];
    uint16_t d;
} kern_block_q6_k;

/* x = d*q with an f32 d (ggml's activation block; bsums unused here) */
typedef struct {
    float d;
    int8_t qs[KERN_QK_K];
    int16_t bsums[KERN_QK_K / 16];
} kern_block_q8_k;

/* x = d*(ls-32)*kvalues_iq4nl[q], 8 sub-blocks of 32, 6-bit ls split in scales_l/scales_h */
typedef struct {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[KERN_QK_K / 64];
    uint8_t qs[KERN_QK_K / 2];
} kern_block_iq4_xs;

/* 8 sub-blocks of 32: qs[0..63] grid indices (4 elements each), then per
 * sub-block a u32: 4 x 7-bit sign indices (ksigns) and a 4-bit scale */
typedef struct {
    uint16_t d;
    uint8_t qs[3 * KERN_QK_K / 8];
} kern_block_iq3_xxs;

/* 8 sub-blocks of 32: 9-bit grid indices (qs + one qh bit), explicit sign bits,
 * 4-bit scales (two per byte) */
typedef struct {
    uint16_t d;
    uint8_t qs[KERN_QK_K / 4];
    uint8_t qh[KERN_QK_K / 32];
    uint8_t signs[KERN_QK_K / 8];
    uint8_t scales[KERN_QK_K / 64];
} kern_block_iq3_s;

/* ternary, 5 trits per byte in qs (base 3, scaled by 256/243), 4 per byte in qh */
typedef struct {
    uint8_t qs[(KERN_QK_K - 4 * KERN_QK_K / 64) / 5];
    uint8_t qh[KERN_QK_K / 64];
    uint16_t d;
} kern_block_tq1_0;

/* ternary, 2 bits per element: x = d*(q-1) */
typedef struct {
    uint8_t qs[KERN_QK_K / 4];
    uint16_t d;
} kern_block_tq2_0;

/* ---- codebooks (ggml-common.h) --------------------------------------------- */

extern const uint8_t kern_ksigns_iq2xs[128]; /* 7 sign bits + even-parity bit 7 */
extern const uint32_t kern_iq3xxs_grid[256];  /* 4 magnitudes per entry, byte 0 first */
extern const uint32_t kern_iq3s_grid[512];

/* ---- leaves (the kern_type_ops of each type) ------------------------------- */

/* X(name) for every type here, in table order. */
#define KERN_KQUANT_TYPES(X) \
    X(q2_k) X(q3_k) X(q4_k) X(q5_k) X(q6_k) X(q8_k) X(iq4_xs) X(iq3_xxs) X(iq3_s) X(tq1_0) X(tq2_0)

#define KERN_KQ_DECL(t)                                                       \
    void kern_sc_dequant_##t(const void *src, float *dst, int n);            \
    void kern_avx2_dequant_##t(const void *src, float *dst, int n);
KERN_KQUANT_TYPES(KERN_KQ_DECL)
#undef KERN_KQ_DECL

#endif
