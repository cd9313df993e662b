/*
 * kern_r8.c — the row-interleaved types CF_Q4_0_R8 / CF_Q8_0_R8 (layout in
 * kern.h, internals in kern_r8.h): element access, the scalar reference
 * leaves, impl selection, and the two helpers kern.c's f32-activation matmul
 * asks for dequantized tiles (kern_r8_deq_rows) and mat-vec slices
 * (kern_r8_mv).  Repacking and the integer (act_quant) matmul driver
 * are kern_r8_mm.c.
 */
#include "kern_r8.h"

#include <assert.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "base/f16.h"
#include "kern_rk.h"

static_assert(KERN_Q4_0_R8_BLOCK == 8 * sizeof(kern_block_q4_0), "Q4_0_R8 block = 8 Q4_0 blocks");
static_assert(KERN_Q8_0_R8_BLOCK == 8 * sizeof(kern_block_q8_0), "Q8_0_R8 block = 8 Q8_0 blocks");
static_assert(sizeof(kern_block_q8x4) == 176, "kern_block_q8x4: 4 d, 4 s, 4 sum, 4x32 qs");


int kern_r8_block_bytes(int type) {
    return type == CF_Q4_0_R8 ? KERN_Q4_0_R8_BLOCK : type == CF_Q8_0_R8 ? KERN_Q8_0_R8_BLOCK : 0;
}

/* ==== element access (scalar reference) ====================================== */

/* d of row r in block blk */
static inline float r8_d(const uint8_t *blk, int r) {
    uint16_t h;
    memcpy(&h, blk + 2 * r, 2);
    return f16_to_f32(h);
}

/* integer value (Q4_0: code - 8, Q8_0: q) of (row r, column k) in block blk, k < 32 */
static inline int r8_q(int type, const uint8_t *blk, int r, int k) {
    if (type == CF_Q4_0_R8) {
        const int kk = k & 15;
        const uint8_t b = blk[16 + 32 * (kk >> 2) + 4 * r + (kk & 3)];
        return (k < 16 ? b & 0x0f : b >> 4) - 8;
    }
    return (int8_t)blk[16 + 32 * (k >> 2) + 4 * r + (k & 3)];
}

void kern_r8_deq_row(int type, const void *w, int n_in, int row, float *dst) {
    const int nb = n_in / 32, bb = kern_r8_block_bytes(type), r = row % 8;
    const uint8_t *grp = (const uint8_t *)w + (size_t)(row / 8) * nb * bb;
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = grp + (size_t)b * bb;
        const float d = r8_d(blk, r);
        for (int k = 0; k < 32; k++) dst[32 * b + k] = (float)r8_q(type, blk, r, k) * d;
    }
}

/* ==== scalar leaves ============================================================= */

static void sc_gemm(int type, const void *wg, const kern_block_q8x4 *a, size_t qstride, int nb,
                    int nt, float *y, size_t ldy) {
    const int bb = kern_r8_block_bytes(type);
    for (int t = 0; t < nt; t++) {
        const kern_block_q8x4 *aq = a + (size_t)(t / 4) * qstride;
        const int tt = t % 4;
        for (int r = 0; r < 8; r++) {
            float sum = 0;
            for (int b = 0; b < nb; b++) {
                const uint8_t *blk = (const uint8_t *)wg + (size_t)b * bb;
                int sumi = 0;
                for (int k = 0; k < 32; k++) sumi += r8_q(type, blk, r, k) * aq[b].qs[tt][k];
                sum = fmaf((float)sumi, r8_d(blk, r) * aq[b].d[tt], sum);
            }
            y[(size_t)t * ldy + r] = sum;
        }
    }
}
static void sc_gemm_q4(const void *wg, const kern_block_q8x4 *a, size_t qs, int nb, int nt, float *y,
                       size_t ldy) {
    sc_gemm(CF_Q4_0_R8, wg, a, qs, nb, nt, y, ldy);
}
static void sc_gemm_q8(const void *wg, const kern_block_q8x4 *a, size_t qs, int nb, int nt, float *y,
                       size_t ldy) {
    sc_gemm(CF_Q8_0_R8, wg, a, qs, nb, nt, y, ldy);
}

static void sc_deq8(int type, const void *wg, int b0, int nbk, float *dst, size_t ld) {
    const int bb = kern_r8_block_bytes(type);
    for (int b = 0; b < nbk; b++) {
        const uint8_t *blk = (const uint8_t *)wg + (size_t)(b0 + b) * bb;
        for (int r = 0; r < 8; r++) {
            const float d = r8_d(blk, r);
            for (int k = 0; k < 32; k++) dst[(size_t)r * ld + 32 * b + k] = (float)r8_q(type, blk, r, k) * d;
        }
    }
}
static void sc_deq8_q4(const void *wg, int b0, int nbk, float *dst, size_t ld) {
    sc_deq8(CF_Q4_0_R8, wg, b0, nbk, dst, ld);
}
static void sc_deq8_q8(const void *wg, int b0, int nbk, float *dst, size_t ld) {
    sc_deq8(CF_Q8_0_R8, wg, b0, nbk, dst, ld);
}

/* sequential f32 sum over k per row: the scalar tile_mm on the dequantized rows */
static void sc_mv8(int type, const void *wg, int b0, int nbk, const float *x, float *y, int accumulate) {
    float w[8][32], s[8] = {0};
    for (int b = 0; b < nbk; b++) {
        sc_deq8(type, wg, b0 + b, 1, &w[0][0], 32);
        for (int r = 0; r < 8; r++)
            for (int k = 0; k < 32; k++) s[r] += w[r][k] * x[32 * b + k];
    }
    for (int r = 0; r < 8; r++) y[r] = accumulate ? y[r] + s[r] : s[r];
}
static void sc_mv8_q4(const void *wg, int b0, int nbk, const float *x, float *y, int accumulate) {
    sc_mv8(CF_Q4_0_R8, wg, b0, nbk, x, y, accumulate);
}
static void sc_mv8_q8(const void *wg, int b0, int nbk, const float *x, float *y, int accumulate) {
    sc_mv8(CF_Q8_0_R8, wg, b0, nbk, x, y, accumulate);
}

static const kern_r8_leaves g_sc_leaves = {
    {sc_gemm_q4, sc_gemm_q8}, {NULL, NULL}, {sc_mv8_q4, sc_mv8_q8}, {sc_deq8_q4, sc_deq8_q8}};
#if defined(__aarch64__)
/* no mv8 of their own: kern.c's mat-vec takes the NEON tile_mm on deq8's rows */
static const kern_r8_leaves g_neon_leaves = {
    {kern_r8_gemm_q4_neon, kern_r8_gemm_q8_neon}, {NULL, NULL}, {sc_mv8_q4, sc_mv8_q8}, {sc_deq8_q4, sc_deq8_q8}};
static const kern_r8_leaves g_dotprod_leaves = {
    {kern_r8_gemm_q4_dotprod, kern_r8_gemm_q8_dotprod}, {NULL, NULL}, {sc_mv8_q4, sc_mv8_q8}, {sc_deq8_q4, sc_deq8_q8}};
#endif

/* ==== impl selection ================================================================ */

int kern_r8_impl_available(int impl) {
    switch (impl) {
    case KERN_R8_SCALAR: return 1;
#if defined(__x86_64__)
    case KERN_R8_AVX2: return kern_isa_available(KERN_ISA_AVX2);
    case KERN_R8_VNNI: return kern_cpu_avx512vnni();
#elif defined(__aarch64__)
    case KERN_R8_NEON: return 1;
    case KERN_R8_DOTPROD: return kern_cpu_dotprod();
#endif
    default: return 0;
    }
}

const char *kern_r8_impl_name(int impl) {
    switch (impl) {
    case KERN_R8_SCALAR: return "scalar";
    case KERN_R8_AVX2: return "avx2";
    case KERN_R8_VNNI: return "vnni";
    case KERN_R8_NEON: return "neon";
    case KERN_R8_DOTPROD: return "dotprod";
    default: return "unknown";
    }
}

static atomic_int g_forced = -1;

int kern_r8_force_impl(int impl) {
    if (impl >= 0 && !kern_r8_impl_available(impl)) return -1;
    atomic_store(&g_forced, impl < 0 ? -1 : impl);
    return 0;
}

int kern_r8_impl_for_isa(int isa) {
    if (isa != KERN_ISA_SIMD || !kern_isa_available(KERN_ISA_SIMD)) return KERN_R8_SCALAR;
    const int f = atomic_load(&g_forced);
    if (f >= 0) return f;
#if defined(__aarch64__)
    return kern_r8_impl_available(KERN_R8_DOTPROD) ? KERN_R8_DOTPROD : KERN_R8_NEON;
#else
    return kern_r8_impl_available(KERN_R8_VNNI) ? KERN_R8_VNNI : KERN_R8_AVX2;
#endif
}

const kern_r8_leaves *kern_r8_leaves_for(int impl) {
    switch (impl) {
#if defined(__x86_64__)
    case KERN_R8_AVX2: return &kern_r8_avx2_leaves;
    case KERN_R8_VNNI: return &kern_r8_vnni_leaves;
#elif defined(__aarch64__)
    case KERN_R8_NEON: return &g_neon_leaves;
    case KERN_R8_DOTPROD: return &g_dotprod_leaves;
#endif
    default: return &g_sc_leaves;
    }
}

/* ==== f32-activation helpers for kern.c =============================================== */

void kern_r8_deq_rows(int isa, int type, const void *w, int n_in, int r0, int nr, int k0, int kc,
                      float *dst, size_t ld) {
    const kern_r8_leaves *L = kern_r8_leaves_for(kern_r8_impl_for_isa(isa));
    const int ti = type == CF_Q8_0_R8;
    const size_t grp = (size_t)(n_in / 32) * kern_r8_block_bytes(type);
    for (int r = 0; r < nr; r += 8)
        L->deq8[ti]((const uint8_t *)w + (size_t)((r0 + r) / 8) * grp, k0 / 32, kc / 32,
                    dst + (size_t)r * ld, ld);
}

int kern_r8_mv(int isa, int type, const void *w, int n_in, int r0, int k0, int kc, const float *x,
               float *y, int accumulate) {
    /* the leaf follows the tile_mm it must equal (isa), not the pinned impl:
     * the AVX2 and VNNI builds of mv8 are the same arithmetic */
#if defined(__x86_64__)
    const kern_r8_leaves *L = isa == KERN_ISA_SIMD ? &kern_r8_avx2_leaves : &g_sc_leaves;
#else
    if (isa == KERN_ISA_SIMD) return -1; /* no mv8 equals the NEON tile_mm: the caller dequantizes */
    const kern_r8_leaves *L = &g_sc_leaves;
#endif
    const size_t grp = (size_t)(n_in / 32) * kern_r8_block_bytes(type);
    L->mv8[type == CF_Q8_0_R8]((const uint8_t *)w + (size_t)(r0 / 8) * grp, k0 / 32, kc / 32, x, y,
                               accumulate);
    return 0;
}

/* ==== layout: sizes and whole-tensor dequantization ========================== */

size_t kern_repack_bytes(int dst_type, int n_rows, int n_cols) {
    const int kb = kern_rk_block_bytes(dst_type);
    if (kb) {
        if (n_rows <= 0 || n_cols <= 0 || n_rows % 8 || n_cols % KERN_QK_K) return 0;
        return (size_t)(n_rows / 8) * (size_t)(n_cols / KERN_QK_K) * (size_t)kb;
    }
    const int bb = kern_r8_block_bytes(dst_type);
    if (!bb || n_rows <= 0 || n_cols <= 0 || n_rows % 8 || n_cols % 32) return 0;
    return (size_t)(n_rows / 8) * (size_t)(n_cols / 32) * (size_t)bb;
}

int kern_r8_dequant(int type, const void *src, int n_rows, int n_cols, float *dst) {
    if (!kern_repack_bytes(type, n_rows, n_cols)) return -1;
    const int nb = n_cols / 32;
    const size_t grp = (size_t)nb * kern_r8_block_bytes(type);
    for (int g = 0; g < n_rows / 8; g++)
        sc_deq8(type, (const uint8_t *)src + (size_t)g * grp, 0, nb, dst + (size_t)g * 8 * n_cols,
                (size_t)n_cols);
    return 0;
}
