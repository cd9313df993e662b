/*
 * kern.c — the per-type table and the f32-activation drivers (threading,
 * tiling, scratch) shared by every ISA.  The scalar reference leaves are
 * kern_scalar.c, the CPU probes kern_cpu.c, and the cf_kernels tables that
 * bind these drivers (and the q8/r8 paths) per ISA kern_table.c.
 *
 * Split of work.  An ISA supplies leaves: per weight type a dequant_row
 * and, where it pays, a fused mat-vec leaf (kern_type_ops.mv), plus a few
 * f32 row primitives (kern_isa_ops: the matmul tile, attention
 * dot/axpy/softmax, rms_norm, swiglu).  The drivers here own everything
 * else — partitioning over the pool, the matmul tiling, the KV-cache
 * writes, RoPE — so the scalar and AVX2 tables differ only in their leaves
 * and the reference path exercises the same drivers.
 *
 * matmul.  n_tokens > 1 is a mat-mat: each thread takes ranges of
 * KERN_MM_ROWS-row tiles; per tile and per KERN_MM_KC-wide slice of the
 * input dimension it dequantizes the rows once into its scratch tile
 * (L1-resident) and the ISA's tile_mm multiplies that tile with every token
 * row, accumulating into y.  Weights are read once per call whatever
 * n_tokens is.  n_tokens == 1 (decode) is a mat-vec over contiguous row
 * ranges per thread, one pass over the weights.
 *
 * Batch invariance (the contract every matmul path keeps, checked by
 * tests/test_kern_batch.c).  A token's outputs are the same bits whatever
 * batch it is in: the mat-mat defines the arithmetic — per (row, token) and
 * slice, tile_mm's sum over the exactly dequantized weights, the slices'
 * sums added to y in order — and the mat-vec reproduces it, through the
 * type's mv leaf (weights decoded in registers into the dequant leaf's
 * values, tile_mm's FMA order), R8's kern_r8_mv, or the same dequantized
 * tile and tile_mm with one token.  So decoding token by token, a prefill in
 * one batch and a reused KV prefix give identical logits.  The partition
 * never changes the arithmetic either: results do not depend on the thread
 * count.
 *
 * The code here is compiled without ISA flags; AVX2 code lives only behind
 * the function pointers of kern_avx2.c.
 */
#include "kern.h"
#include "kern_elem.h"
#include "kern_kquants.h"
#include "kern_q8.h"
#include "kern_r8.h"
#include "kern_rk.h"

#include <assert.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/f16.h"
#include "base/pool.h"
#include "quant.h"


static_assert(sizeof(kern_block_q4_0) == 18, "block_q4_0 is 18 bytes in ggml");
static_assert(sizeof(kern_block_q4_1) == 20, "block_q4_1 is 20 bytes in ggml");
static_assert(sizeof(kern_block_q5_0) == 22, "block_q5_0 is 22 bytes in ggml");
static_assert(sizeof(kern_block_q5_1) == 24, "block_q5_1 is 24 bytes in ggml");
static_assert(sizeof(kern_block_q8_0) == 34, "block_q8_0 is 34 bytes in ggml");
static_assert(sizeof(kern_block_iq4_nl) == 18, "block_iq4_nl is 18 bytes in ggml");
static_assert(sizeof(kern_block_mxfp4) == 17, "block_mxfp4 is 17 bytes in ggml");
static_assert(KERN_MM_KC % 256 == 0, "KC must hold whole blocks of every type (K-quants: 256)");
static_assert(CF_F32 == 0 && CF_F16 == 1 && CF_Q4_0 == 2 && CF_Q4_1 == 3 && CF_Q5_0 == 6 &&
              CF_Q5_1 == 7 && CF_Q8_0 == 8 && CF_IQ4_NL == 20 && CF_BF16 == 30 && CF_MXFP4 == 39,
              "prelude type ids are ggml's");

#define KERN_TYPE_COUNT 106 /* GGML_TYPE_COUNT is 40; cinfer's R8 types are 100, 101, RK 102..105 */

/* ==== the type table ======================================================= */

static const kern_type_ops g_types[KERN_TYPE_COUNT] = {
    /* name, block, bytes, {dequant}, vec_dot_type, {dot_q}, {gemm4}, {gemv4}, {mv} per ISA
     * (KERN_SIMD: the AVX2 leaf on x86-64, the NEON one on aarch64) */
    [CF_F32] = {"F32", 1, 4, {kern_sc_dequant_f32, kern_sc_dequant_f32}, CF_F32},
    [CF_F16] = {"F16", 1, 2, {kern_sc_dequant_f16, KERN_SIMD(kern_avx2_dequant_f16, kern_neon_dequant_f16)}, CF_F16,
                {0}, {0}, {0}, {NULL, KERN_SIMD(kern_avx2_mv_f16, NULL)}},
    [CF_BF16] = {"BF16", 1, 2, {kern_sc_dequant_bf16, KERN_SIMD(kern_avx2_dequant_bf16, kern_sc_dequant_bf16)}, CF_BF16,
                 {0}, {0}, {0}, {NULL, KERN_SIMD(kern_avx2_mv_bf16, NULL)}},
/* the 32-element types: Q8_0 or Q8_1 activations, 4-token and 4-row leaves,
 * fused mat-vec (x86-64; NEON: the dequantized tile).  N: the NEON slot's
 * leaves, kern_neon_* (kern_neon.c, kern_q8_neon.c) or the scalar kern_sc_*. */
#define Q32_TYPE(id, NAME, t, VDT, N)                                                              \
    [id] = {NAME, KERN_QK, (int)sizeof(kern_block_##t),                                            \
            {kern_sc_dequant_##t, KERN_SIMD(kern_avx2_dequant_##t, kern_##N##_dequant_##t)}, VDT,   \
            {kern_sc_dotq_##t, KERN_SIMD(kern_avx2_dotq_##t, kern_##N##_dotq_##t)},                \
            {kern_sc_gemm4_##t, KERN_SIMD(kern_avx2_gemm4_##t, kern_##N##_gemm4_##t)},             \
            {kern_sc_gemv4_##t, KERN_SIMD(kern_avx2_gemv4_##t, kern_##N##_gemv4_##t)},             \
            {NULL, KERN_SIMD(kern_avx2_mv_##t, NULL)}}
    Q32_TYPE(CF_Q4_0, "Q4_0", q4_0, CF_Q8_0, neon),
    Q32_TYPE(CF_Q4_1, "Q4_1", q4_1, KERN_T_Q8_1, sc),
    Q32_TYPE(CF_Q5_0, "Q5_0", q5_0, CF_Q8_0, sc),
    Q32_TYPE(CF_Q5_1, "Q5_1", q5_1, KERN_T_Q8_1, sc),
    Q32_TYPE(CF_Q8_0, "Q8_0", q8_0, CF_Q8_0, neon),
    Q32_TYPE(CF_IQ4_NL, "IQ4_NL", iq4_nl, CF_Q8_0, sc),
    Q32_TYPE(CF_MXFP4, "MXFP4", mxfp4, CF_Q8_0, sc),
#undef Q32_TYPE
/* 256-element super-block types: kern_kquants.c (scalar), kern_kquants_avx2.c */
/* neon_dotq: the NEON integer dot (kern_q8_neon.c) or the scalar one */
#define KQ_TYPE_N(id, NAME, t, neon_dotq)                                                 \
    [id] = {NAME, KERN_QK_K, (int)sizeof(kern_block_##t),                                 \
            {kern_sc_dequant_##t, KERN_SIMD(kern_avx2_dequant_##t, kern_sc_dequant_##t)}, KERN_T_Q8_K, \
            {kern_sc_dotq_##t, KERN_SIMD(kern_avx2_dotq_##t, neon_dotq)}}
#define KQ_TYPE(id, NAME, t) KQ_TYPE_N(id, NAME, t, kern_sc_dotq_##t)
    KQ_TYPE(KERN_T_Q2_K, "Q2_K", q2_k),
    KQ_TYPE(KERN_T_Q3_K, "Q3_K", q3_k),
    KQ_TYPE_N(KERN_T_Q4_K, "Q4_K", q4_k, kern_neon_dotq_q4_k),
    KQ_TYPE(KERN_T_Q5_K, "Q5_K", q5_k),
    KQ_TYPE_N(KERN_T_Q6_K, "Q6_K", q6_k, kern_neon_dotq_q6_k),
    /* Q8_K is ggml's activation format, not a matmul weight type there: f32 activations */
    [KERN_T_Q8_K] = {"Q8_K", KERN_QK_K, (int)sizeof(kern_block_q8_k),
                     {kern_sc_dequant_q8_k, KERN_SIMD(kern_avx2_dequant_q8_k, kern_sc_dequant_q8_k)}, CF_F32},
    KQ_TYPE(KERN_T_IQ4_XS, "IQ4_XS", iq4_xs),
    KQ_TYPE(KERN_T_IQ3_XXS, "IQ3_XXS", iq3_xxs),
    KQ_TYPE(KERN_T_IQ3_S, "IQ3_S", iq3_s),
    KQ_TYPE(KERN_T_TQ1_0, "TQ1_0", tq1_0),
    KQ_TYPE(KERN_T_TQ2_0, "TQ2_0", tq2_0),
#undef KQ_TYPE
#undef KQ_TYPE_N
    /* row-interleaved (kern.h, kern_r8.c): no per-row leaves; matmul goes to
     * kern_r8_matmul.  type_size is the ggml block's, per row (kern_row_bytes). */
    [CF_Q4_0_R8] = {"q4_0_r8", 32, 18, {0}, CF_Q8_0},
    [CF_Q8_0_R8] = {"q8_0_r8", 32, 34, {0}, CF_Q8_0},
    /* row-interleaved K-quants (kern.h, kern_rk.c): matmul goes to kern_rk_matmul
     * under act_quant; f32 activations dequantize their rows into the tile */
    [CF_Q4_K_R8] = {"q4_k_r8", KERN_QK_K, (int)sizeof(kern_block_q4_k), {0}, KERN_T_Q8_K},
    [CF_Q5_K_R8] = {"q5_k_r8", KERN_QK_K, (int)sizeof(kern_block_q5_k), {0}, KERN_T_Q8_K},
    [CF_Q6_K_R8] = {"q6_k_r8", KERN_QK_K, (int)sizeof(kern_block_q6_k), {0}, KERN_T_Q8_K},
    [CF_IQ4_XS_R8] = {"iq4_xs_r8", KERN_QK_K, (int)sizeof(kern_block_iq4_xs), {0}, KERN_T_Q8_K},
};

const kern_type_ops *kern_type_ops_get(int type) {
    if (type < 0 || type >= KERN_TYPE_COUNT || !g_types[type].name) return NULL;
    return &g_types[type];
}

int kern_type_supported(int type) { return kern_type_ops_get(type) != NULL; }

int kern_type_is_r8(int type) { return type == CF_Q4_0_R8 || type == CF_Q8_0_R8; }

int kern_type_is_rk(int type) { return type >= CF_Q4_K_R8 && type <= CF_IQ4_XS_R8; }

int kern_type_block(int type) {
    const kern_type_ops *t = kern_type_ops_get(type);
    return t ? t->blck : 0;
}

size_t kern_row_bytes(int type, int n) {
    const kern_type_ops *t = kern_type_ops_get(type);
    if (!t || n < 0 || n % t->blck) return 0;
    return (size_t)(n / t->blck) * (size_t)t->type_size;
}

static const kern_isa_ops *isa_ops(int isa) {
    switch (isa) {
    case KERN_ISA_SCALAR: return &kern_scalar_ops;
    case KERN_ISA_SIMD: return KERN_SIMD(&kern_avx2_ops, &kern_neon_ops);
    default: return NULL;
    }
}

/* ==== drivers =============================================================== */

/* [*lo, *hi) = part ith of nth of [0, n), contiguous and balanced. */
static void split(long n, int ith, int nth, long *lo, long *hi) {
    *lo = n * ith / nth;
    *hi = n * (ith + 1) / nth;
}

/* Per-thread scratch of at least `need` bytes from the pool, or NULL when the
 * caller must use its stack buffer (no pool).  See kern.h "Scratch". */
#ifdef CINFER_TEST_BUILD
int kern_test_allow_small_scratch;
long kern_test_scratch_fallbacks;
void kern_test_note_fallback(void) { __atomic_fetch_add(&kern_test_scratch_fallbacks, 1, __ATOMIC_RELAXED); }
#endif

static void *scratch_get(cf_env *E, int ith, size_t need) {
    size_t have = 0;
    void *p = pool_scratch((pool *)E->pool, ith, &have);
    if (p && have >= need) return p;
#ifdef CINFER_TEST_BUILD
    if (E->pool && !kern_test_allow_small_scratch) {
        fprintf(stderr, "kern: pool scratch %zu bytes < %zu needed; call pool_reserve(pool, "
                        "kern_scratch_bytes(n_ctx))\n", have, need);
        abort();
    }
    if (E->pool) kern_test_note_fallback();
#endif
    return NULL;
}

#define KERN_ATT_BLOCK 8 /* prompt tokens per attention block (att_block) */

size_t kern_scratch_bytes(int n_ctx) {
    /* attention scores of up to 4 heads (a quad of att_block) of a block of
     * KERN_ATT_BLOCK prompt tokens (att_block) */
    size_t att = (size_t)(n_ctx > 0 ? n_ctx : 0) * 4 * KERN_ATT_BLOCK * sizeof(float);
    return att > KERN_MM_TILE_BYTES ? att : KERN_MM_TILE_BYTES;
}

/* Below this many multiply-adds a call runs on the calling thread only: the
 * fork-join costs more than it saves. */
#define PAR_MIN_WORK 32768L

static void run(cf_env *E, long work, void (*fn)(void *, int, int), void *arg) {
    if (work < PAR_MIN_WORK) fn(arg, 0, 1);
    else pool_run((pool *)E->pool, fn, arg);
}

static void fill_nan(float *y, long n) {
    for (long i = 0; i < n; i++) y[i] = NAN;
}

/* ---- matmul ---------------------------------------------------------------- */

typedef struct {
    cf_env *E;
    const kern_isa_ops *ops;
    const kern_type_ops *ty;
    int isa;
    float *y;
    const float *x;
    const uint8_t *w;
    int type, n_out, n_in, n_tok;
    size_t row_bytes;
} mm_job;

/* The weights of rows [r0, r0 + nr) x columns [k0, k0 + kc) as an f32 tile:
 * F32 in place, everything else dequantized into `tile` (nr <= KERN_MM_ROWS
 * rows of KERN_MM_KC floats; R8: r0 and nr multiples of 8).  *ws = row stride. */
static const float *w_tile(const mm_job *j, float *tile, long r0, int nr, int k0, int kc, size_t *ws) {
    if (j->type == CF_F32) {
        *ws = (size_t)j->n_in;
        return (const float *)j->w + (size_t)r0 * j->n_in + k0;
    }
    *ws = KERN_MM_KC;
    if (kern_type_is_r8(j->type)) {
        kern_r8_deq_rows(j->isa, j->type, j->w, j->n_in, (int)r0, nr, k0, kc, tile, KERN_MM_KC);
        return tile;
    }
    if (kern_type_is_rk(j->type)) {
        kern_rk_deq_rows(j->isa, j->type, j->w, j->n_in, (int)r0, nr, k0, kc, tile, KERN_MM_KC);
        return tile;
    }
    const kern_dequant_fn deq = j->ty->dequant[j->isa];
    const size_t off = (size_t)(k0 / j->ty->blck) * (size_t)j->ty->type_size;
    for (int r = 0; r < nr; r++)
        deq(j->w + (size_t)(r0 + r) * j->row_bytes + off, tile + (size_t)r * KERN_MM_KC, kc);
    return tile;
}

/* Mat-vec rows [r0, r1): per row the arithmetic of the mat-mat path for one
 * token — tile_mm over each KERN_MM_KC slice, the slices' sums added to y in
 * order — so a token's result never depends on the batch it came in.  Types
 * with a fused leaf (mv: weights decoded in registers, bit-identical to
 * dequant + tile_mm) skip the tile; the others go through an L1 tile.
 *
 * Up to MV_ROWS rows are in flight (8 FMA chains), and they are far apart:
 * the range is cut into equal parts and row i of a step is the next row of
 * part i, so each chain reads one long sequential stream.  Rows next to
 * each other (two streams in one 4 KiB page) ran 2-3x slower from DRAM on
 * this machine (Zen 4 VM, 1 thread: F16 32000x1024 10.7 vs 23 GB/s; Q8_0
 * 4-row mat-vec 6 vs 17 GB/s); streams a part apart run at the one-row speed.
 * R8 needs none of it: a row group is one stream and kern_r8_mv has its 8
 * rows in the lanes. */
#define MV_ROWS 8
static_assert(MV_ROWS == KERN_R8_ROWS, "a mat-vec step is one R8 row group");
#define MV_TILE_LD (KERN_MM_KC + 16) /* tile row stride in floats: padded off 4 KiB multiples */

/* Rows r, r + stride, ..., nr of them (nr <= MV_ROWS), the whole input:
 * y[r + i * stride] = row r + i * stride times x. */
static void mv_rows_strided(const mm_job *j, float *tile, long r, long stride, int nr) {
    const kern_mv_fn mv = j->ty->mv[j->isa];
    float t[MV_ROWS];
    for (int k0 = 0; k0 < j->n_in; k0 += KERN_MM_KC) {
        const int kc = j->n_in - k0 < KERN_MM_KC ? j->n_in - k0 : KERN_MM_KC;
        const size_t off = (size_t)(k0 / j->ty->blck) * (size_t)j->ty->type_size;
        if (mv) {
            mv(j->w + (size_t)r * j->row_bytes + off, (size_t)stride * j->row_bytes, nr, j->x + k0, kc, t, k0 > 0);
            continue;
        }
        const float *wt = tile;
        size_t ws = MV_TILE_LD;
        if (j->type == CF_F32) { /* already f32: multiply in place */
            wt = (const float *)j->w + (size_t)r * j->n_in + k0;
            ws = (size_t)stride * j->n_in;
        } else {
            for (int i = 0; i < nr; i++)
                j->ty->dequant[j->isa](j->w + (size_t)(r + i * stride) * j->row_bytes + off,
                                       tile + (size_t)i * MV_TILE_LD, kc);
        }
        j->ops->tile_mm(wt, ws, nr, j->x + k0, (size_t)j->n_in, 1, kc, t, 1, k0 > 0);
    }
    for (int i = 0; i < nr; i++) j->y[r + i * stride] = t[i];
}

static void mm_vec_rows(const mm_job *j, long r0, long r1) {
    _Alignas(64) float tile[MV_ROWS * MV_TILE_LD];
    if (kern_type_is_r8(j->type)) { /* r0, r1 multiples of 8 */
        for (long rb = r0; rb < r1; rb += KERN_R8_ROWS)
            for (int k0 = 0; k0 < j->n_in; k0 += KERN_MM_KC) {
                const int kc = j->n_in - k0 < KERN_MM_KC ? j->n_in - k0 : KERN_MM_KC;
                if (kern_r8_mv(j->isa, j->type, j->w, j->n_in, (int)rb, k0, kc, j->x + k0, j->y + rb, k0 > 0) == 0)
                    continue;
                size_t ws; /* NEON: the mat-mat's tile, one token */
                const float *wt = w_tile(j, tile, rb, KERN_R8_ROWS, k0, kc, &ws);
                j->ops->tile_mm(wt, ws, KERN_R8_ROWS, j->x + k0, (size_t)j->n_in, 1, kc, j->y + rb,
                                (size_t)j->n_out, k0 > 0);
            }
        return;
    }
    if (kern_type_is_rk(j->type)) { /* the mat-mat's dequantized tile, one token (r0, r1 multiples of 8) */
        for (long rb = r0; rb < r1; rb += KERN_R8_ROWS)
            for (int k0 = 0; k0 < j->n_in; k0 += KERN_MM_KC) {
                const int kc = j->n_in - k0 < KERN_MM_KC ? j->n_in - k0 : KERN_MM_KC;
                size_t ws;
                const float *wt = w_tile(j, tile, rb, KERN_R8_ROWS, k0, kc, &ws);
                j->ops->tile_mm(wt, ws, KERN_R8_ROWS, j->x + k0, (size_t)j->n_in, 1, kc, j->y + rb,
                                (size_t)j->n_out, k0 > 0);
            }
        return;
    }
    /* F32/F16/BF16 (2-4 bytes a weight, little work each): 4 streams beat 8
     * from DRAM (F16 32000x1024: 22 vs 19 GB/s; F32: 19.7 vs 15.2) and 4
     * chains cover the FMAs; quantized rows take 8 (Q4_0 1024x1024 in cache:
     * 84 vs 105 us) */
    const int g = j->ty->blck == 1 ? 4 : MV_ROWS;
    const long part = (r1 - r0) / g;
    for (long r = r0; r < r0 + part; r++) mv_rows_strided(j, tile, r, part, g);
    for (long r = r0 + part * g; r < r1; r++) mv_rows_strided(j, tile, r, 1, 1);
}

static void mm_vec_worker(void *arg, int ith, int nth) {
    const mm_job *j = arg;
    long r0, r1;
    if (kern_type_is_r8(j->type) || kern_type_is_rk(j->type)) { /* whole 8-row groups */
        split(j->n_out / KERN_R8_ROWS, ith, nth, &r0, &r1);
        r0 *= KERN_R8_ROWS;
        r1 *= KERN_R8_ROWS;
    } else {
        split(j->n_out, ith, nth, &r0, &r1);
    }
    mm_vec_rows(j, r0, r1);
}

static void mm_mat_tiles(const mm_job *j, float *tile, long tile0, long tile1) {
    for (long tl = tile0; tl < tile1; tl++) {
        long r0 = tl * KERN_MM_ROWS;
        int nr = j->n_out - r0 < KERN_MM_ROWS ? (int)(j->n_out - r0) : KERN_MM_ROWS;
        for (int k0 = 0; k0 < j->n_in; k0 += KERN_MM_KC) {
            int kc = j->n_in - k0 < KERN_MM_KC ? j->n_in - k0 : KERN_MM_KC;
            size_t ws; /* R8: nr is a multiple of 8 (n_out % 8 == 0) */
            const float *wt = w_tile(j, tile, r0, nr, k0, kc, &ws);
            j->ops->tile_mm(wt, ws, nr, j->x + k0, (size_t)j->n_in, j->n_tok, kc, j->y + r0,
                            (size_t)j->n_out, k0 > 0);
        }
    }
}

static void mm_mat_worker(void *arg, int ith, int nth) {
    const mm_job *j = arg;
    long n_tiles = (j->n_out + KERN_MM_ROWS - 1) / KERN_MM_ROWS, t0, t1;
    split(n_tiles, ith, nth, &t0, &t1);
    if (t0 == t1) return;
    float *tile = scratch_get(j->E, ith, KERN_MM_TILE_BYTES);
    if (tile) {
        mm_mat_tiles(j, tile, t0, t1);
    } else {
        _Alignas(64) float stack_tile[KERN_MM_ROWS * KERN_MM_KC];
        mm_mat_tiles(j, stack_tile, t0, t1);
    }
}

void kern_matmul_f32act(int isa, cf_env *E, float *y, const float *x, const void *w, int type,
                        int n_out, int n_in, int n_tok) {
    const kern_type_ops *ty = kern_type_ops_get(type);
    if (!ty || n_in % ty->blck || ((kern_type_is_r8(type) || kern_type_is_rk(type)) && n_out % 8)) {
        fill_nan(y, (long)n_out * n_tok); /* the compiler checks types; never crash here */
        return;
    }
    mm_job j = {E, isa_ops(isa), ty, isa, y, x, w, type, n_out, n_in, n_tok,
                kern_row_bytes(type, n_in)};
    long work = (long)n_out * n_in * n_tok;
    run(E, work, n_tok == 1 ? mm_vec_worker : mm_mat_worker, &j);
}

/* ---- get_rows ---------------------------------------------------------------- */

void kern_drv_get_rows(int isa, cf_env *E, float *y, const void *w, int type, int n,
                         const int *ids, int n_tok) {
    if (kern_type_is_r8(type) || kern_type_is_rk(type)) { /* one row out of its interleaved group */
        if (n % (kern_type_is_r8(type) ? 32 : KERN_QK_K)) {
            fill_nan(y, (long)n * n_tok);
            return;
        }
        for (int t = 0; t < n_tok; t++) {
            if (kern_type_is_r8(type)) kern_r8_deq_row(type, w, n, ids[t], y + (size_t)t * n);
            else kern_rk_deq_rows(isa, type, w, n, ids[t], 1, 0, n, y + (size_t)t * n, (size_t)n);
        }
        return;
    }
    const kern_type_ops *ty = kern_type_ops_get(type);
    if (!ty || !ty->dequant[isa] || n % ty->blck) {
        fill_nan(y, (long)n * n_tok);
        return;
    }
    size_t rb = kern_row_bytes(type, n);
    for (int t = 0; t < n_tok; t++)
        ty->dequant[isa]((const uint8_t *)w + (size_t)ids[t] * rb, y + (size_t)t * n, n);
}

/* ---- row-wise ops: rms_norm, swiglu --------------------------------------- */

typedef struct {
    const kern_isa_ops *ops;
    float *y;
    const float *a, *b;
    float eps;
    int n, n_tok;
} rows_job;

static void rms_norm_worker(void *arg, int ith, int nth) {
    const rows_job *j = arg;
    long t0, t1;
    split(j->n_tok, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++)
        j->ops->rms_norm_row(j->y + t * j->n, j->a + t * j->n, j->b, j->n, j->eps);
}

void kern_drv_rms_norm(int isa, cf_env *E, float *y, const float *x, const float *w, int n,
                         float eps, int n_tok) {
    rows_job j = {isa_ops(isa), y, x, w, eps, n, n_tok};
    run(E, n_tok > 1 ? (long)n * n_tok : 0, rms_norm_worker, &j);
}

static void swiglu_worker(void *arg, int ith, int nth) {
    const rows_job *j = arg;
    long total = (long)j->n * j->n_tok, i0, i1;
    split(total / 8, ith, nth, &i0, &i1); /* whole vectors per thread */
    i0 *= 8;
    i1 = ith == nth - 1 ? total : i1 * 8;
    if (i1 > i0) j->ops->swiglu_row(j->y + i0, j->a + i0, j->b + i0, (int)(i1 - i0));
}

void kern_drv_swiglu(int isa, cf_env *E, float *y, const float *g, const float *u, int n,
                       int n_tok) {
    rows_job j = {isa_ops(isa), y, g, u, 0, n, n_tok};
    run(E, (long)n * n_tok * 8, swiglu_worker, &j); /* an expf is worth ~8 multiply-adds */
}

/* ---- rope ------------------------------------------------------------------- */

/* ggml_compute_forward_rope_f32: theta starts at the position (float) and is
 * multiplied by theta_scale = powf(freq_base, -2/n_rot) once per pair, in
 * float; with freq factors pair i starts from theta / freq_factors[i]
 * (ggml_rope_cache_init); YaRN (rope_yarn, ggml_rope_yarn_corr_dims) mixes
 * the interpolated angle freq_scale·theta back toward theta by a ramp over
 * the pair index and scales cos and sin by mscale. */
static float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * logf(n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

void kern_drv_rope(cf_env *E, float *x, int n_head, int head_dim, int n_rot, float freq_base,
                   int mode, float freq_scale, float ext_factor, float attn_factor, float beta_fast,
                   float beta_slow, int n_ctx_orig, const float *freq_factors, int n_tok) {
    const float theta_scale = powf(freq_base, -2.0f / (float)n_rot);
    const int half = n_rot / 2;
    float corr[2] = {0.0f, 0.0f};
    if (ext_factor != 0.0f) {
        const float lo = floorf(yarn_corr_dim(n_rot, n_ctx_orig, beta_fast, freq_base));
        const float hi = ceilf(yarn_corr_dim(n_rot, n_ctx_orig, beta_slow, freq_base));
        corr[0] = lo > 0 ? lo : 0;
        corr[1] = hi < n_rot - 1 ? hi : (float)(n_rot - 1);
    }
    const float mscale = ext_factor != 0.0f ? attn_factor * (1.0f + 0.1f * logf(1.0f / freq_scale))
                                            : attn_factor;
    for (int t = 0; t < n_tok; t++) {
        float *row = x + (size_t)t * n_head * head_dim;
        float theta_base = (float)(E->pos + t);
        for (int i = 0; i < half; i++) {
            const float theta_extrap = freq_factors ? theta_base / freq_factors[i] : theta_base;
            float theta = freq_scale * theta_extrap;
            if (ext_factor != 0.0f) {
                const float y = ((float)i - corr[0]) / fmaxf(0.001f, corr[1] - corr[0]);
                const float mix = (1 - fminf(1, fmaxf(0, y))) * ext_factor; /* rope_yarn_ramp */
                theta = theta * (1 - mix) + theta_extrap * mix;
            }
            const float c = cosf(theta) * mscale, s = sinf(theta) * mscale;
            theta_base *= theta_scale;
            for (int h = 0; h < n_head; h++) {
                float *hx = row + (size_t)h * head_dim;
                int i0 = mode == CF_ROPE_NEOX ? i : 2 * i;
                int i1 = mode == CF_ROPE_NEOX ? i + half : 2 * i + 1;
                const float x0 = hx[i0], x1 = hx[i1];
                hx[i0] = x0 * c - x1 * s;
                hx[i1] = x0 * s + x1 * c;
            }
        }
    }
}

/* ---- attention ---------------------------------------------------------------- */

typedef struct {
    cf_env *E;
    const kern_isa_ops *ops;
    int isa;
    float *out;
    const float *q;
    const float *kc, *vc; /* this layer's caches (n_ctx rows of ks / vs floats): F32 caches */
    size_t ks, vs;        /* cache row strides, in values */
    int tk, tv;           /* ggml types of the K and V rows (CF_F32: kc/vc are read directly) */
    const char *kq, *vq;  /* the same caches as bytes, rows of kb / vb bytes (any type) */
    size_t kb, vb;
    kern_dequant_fn deq_k, deq_v; /* the ISA's dequant_row of tk / tv */
    int n_head, n_head_kv, head_dim, head_dim_v, n_tok, pos;
    int v_head;           /* offset of kv head h's values in a vc row: h * v_head */
    float scale;
    int window;    /* > 0: sliding window of this many positions; < 0: bidirectional */
    float softcap; /* > 0: scores capped softcap·tanh(s/softcap) */
    const float *sinks; /* (n_head) or NULL */
    int nb; /* > 1: prompt units are blocks of nb tokens (att_block) */
} att_job;

/* 1 / the softmax denominator of n scores s (exponentiated in place),
 * including head h's sink logit when the model has sinks: ggml_soft_max_ext
 * (max over scores and sink, Σ exp in double, the sink's exp added). */
static float att_softmax(const att_job *j, float *s, int n, float max, int h) {
    if (j->sinks && j->sinks[h] > max) max = j->sinks[h];
    double sum = j->ops->softmax_exp(s, n, max);
    if (j->sinks) sum += (double)expf(j->sinks[h] - max);
    return (float)(1.0 / sum);
}

/* Rows 0..nh-1 of s (ss floats apart; n_kv scores each, heads h0..): the
 * softcap (tanh, recomputing max[h]) when the layer has one, then
 * att_softmax; inv[h] gets each row's 1 / sum. */
static void att_rows_softmax(const att_job *j, float *s, size_t ss, int nh, int n_kv, int h0, float *max,
                             float *inv) {
    for (int h = 0; h < nh; h++) {
        float *sh = s + (size_t)h * ss;
        if (j->softcap > 0.0f) {
            max[h] = -INFINITY;
            for (int p = 0; p < n_kv; p++) {
                sh[p] = tanhf(sh[p] * (1.0f / j->softcap)) * j->softcap;
                if (sh[p] > max[h]) max[h] = sh[p];
            }
        }
        inv[h] = att_softmax(j, sh, n_kv, max[h], h0 + h);
    }
}


/* Keys *p0 .. *p0 + *n_kv - 1 of token t: causal, and within the sliding
 * window when set; bidirectional (window < 0): the whole batch. */
static void att_range(const att_job *j, int t, int *p0, int *n_kv) {
    const int p_end = j->window < 0 ? j->pos + j->n_tok : j->pos + t + 1;
    *p0 = j->window > 0 && p_end > j->window ? p_end - j->window : 0;
    *n_kv = p_end - *p0;
}

/* ---- attention over an F16 / Q8_0 / Q4_0 cache ------------------------------
 * The K (V) rows of a tile of positions are dequantized with the ISA's
 * dequant_row — only the blocks that cover this kv head's slice of the row,
 * so any kv_dim % 32 == 0 works whatever head_dim is — into an L1 tile of
 * KERN_ATT_TILE floats on the stack, and the f32 leaves above run on the
 * tile: the scores of the tile's positions, then (after the softmax over
 * all positions) the weighted sum continued tile after tile (att_block).
 * The score of a position (score tiles start a multiple of 8 keys after the
 * token's first key) and the FMA chain of an output (key order, accumulate
 * = 1 continues it) do not depend on where tiles start, so the result is
 * the same bits as dequantizing the whole cache first, and batch invariance
 * holds (a token reads the rows as stored, whatever batch stored them). */
#define KERN_ATT_TILE 8192

/* Geometry of one kv head's slice of a row of `type`: the covering blocks
 * start at element *e0 (a block boundary), the slice at *off within them,
 * *span elements (whole blocks) dequantized per row. */
static void att_span(int type, size_t first, int n, size_t *e0, int *off, int *span) {
    const int blk = kern_type_block(type);
    *e0 = first / (size_t)blk * (size_t)blk;
    *off = (int)(first - *e0);
    *span = (*off + n + blk - 1) / blk * blk;
}

/* Where the attention leaves read one kv head's K (or V) slice of the cache
 * rows: an F32 cache in place (f32: row 0's slice, stride floats apart), an
 * F16 one in place for the SIMD leaves (h16: row 0's slice, stride halves
 * apart), any other type dequantized row by row into the caller's tile
 * (att_span: the covering blocks at byte0 of each row_bytes row, span
 * floats per tile row, the slice at off within them). */
typedef struct {
    const float *f32;
    const uint16_t *h16;
    size_t stride;
    const char *rows;
    size_t row_bytes, byte0;
    int off, span;
    kern_dequant_fn deq;
} kv_src;

/* The K (v = 0) or V (v = 1) slice of kv head kvh; halves: the leaves read
 * F16 rows in place (kern_avx2_att_*, kern_avx512_att_*: f16 = 1). */
static kv_src kv_src_of(const att_job *j, int v, int kvh, int halves) {
    const int type = v ? j->tv : j->tk, n = v ? j->head_dim_v : j->head_dim;
    const size_t first = (size_t)kvh * (size_t)(v ? j->v_head : j->head_dim);
    kv_src c = {NULL, NULL, v ? j->vs : j->ks, v ? j->vq : j->kq, v ? j->vb : j->kb, 0, 0, 0, v ? j->deq_v : j->deq_k};
    size_t e0;
    att_span(type, first, n, &e0, &c.off, &c.span); /* F32, F16: off 0, span n */
    c.byte0 = kern_row_bytes(type, (int)e0);
    if (type == CF_F32) c.f32 = (v ? j->vc : j->kc) + first;
    if (type == CF_F16 && halves) {
        c.h16 = (const uint16_t *)(const void *)(c.rows + c.byte0);
        c.stride = c.row_bytes / sizeof(uint16_t);
    }
    return c;
}

/* Row data (a kv_tile) advanced by ofs values: halves or floats */
static const void *kv_at(const void *p, size_t ofs, int h16) {
    return h16 ? (const void *)((const uint16_t *)p + ofs) : (const void *)((const float *)p + ofs);
}

/* Rows r0..r0+nr-1 of the slice (nr * span <= KERN_ATT_TILE when the rows
 * are dequantized into tile): returns row r0's slice (halves when c->h16),
 * *st gets the stride between rows in values. */
static const void *kv_tile(const kv_src *c, float *tile, int r0, int nr, size_t *st) {
    if (c->f32 || c->h16) {
        *st = c->stride;
        return kv_at(c->f32 ? (const void *)c->f32 : (const void *)c->h16, (size_t)r0 * c->stride, c->h16 != NULL);
    }
    for (int r = 0; r < nr; r++)
        c->deq(c->rows + (size_t)(r0 + r) * c->row_bytes + c->byte0, tile + (size_t)r * c->span, c->span);
    *st = (size_t)c->span;
    return tile + c->off;
}

/* ---- a block of query tokens and heads ----------------------------------------
 * Tokens t0..t0+nb-1 (nb 1: one token alone), heads h0..h0+nh-1 in units of
 * w (4: the AVX-512 four-head leaves on heads that share a kv head; 1: one
 * head at a time); the heads may span several kv heads (decode gives a
 * thread a range of them).  Each K (V) tile of positions is fetched once per
 * kv head (kv_tile: an F32 or, for the SIMD leaves, F16 cache read in place,
 * other types dequantized into the stack tile) and used by every token and
 * head of the block; the kv heads' slices of a cache row lie side by side,
 * so a range of kv heads reads one run of each row (a kv head alone reads a
 * short run at a stride of the whole row, which costs a DRAM latency per key
 * at depth).  Token b attends to keys p0[b]..p0[b]+n_kv[b]-1 (att_range); a
 * sliding window shifts p0 by one per clipped token, so p0 rises by d <=
 * nb - 1 across the block.
 *
 * Per token and head the leaf calls are the ones it makes alone: its score
 * calls start at p0[b] + pt, pt a multiple of kr (a multiple of 8 whenever
 * the tile holds 8 rows: the SIMD score leaves take keys in blocks of 4 or 8
 * with a different tail sum, so any such grid gives every key the block it
 * has untiled), nrb = min(kr, n_kv[b] - pt) keys each, all inside the K
 * tile of kr + d rows from p0[0] + pt; its weighted sum runs over its keys
 * in key order, split wherever the V tiles split them (accumulate = 1
 * continues the FMA chain, so a split changes no bits); the softmax is its
 * own.  Only the loops over tokens and heads moved inside the loop over
 * tiles, so every output has the bits of the token and head alone (batch
 * invariance, test_kern_kv).  When the tile cannot hold 8 + d rows (head
 * slices over 1000 floats) a clipped block runs its tokens one by one, and
 * a range of kv heads runs them one by one (their tiles may differ).
 * Token b's scores live at s + b * nh * ss (nh rows of ss floats; ss 0: the
 * token's n_kv); nb * nh <= KERN_ATT_ROWS. */
#define KERN_ATT_F32_ROWS 64
#define KERN_ATT_ROWS (4 * KERN_ATT_BLOCK)

/* The heads [*ha, *hb) of the range h0..h0+nh-1 that share kv head kvh (g heads a group) */
static void att_group_heads(int h0, int nh, int g, int kvh, int *ha, int *hb) {
    *ha = kvh * g > h0 ? kvh * g : h0;
    *hb = (kvh + 1) * g < h0 + nh ? (kvh + 1) * g : h0 + nh;
}

static void att_block(const att_job *j, float *s, size_t ss, int t0, int nb, int h0, int nh, int w) {
    const int hd = j->head_dim, hdv = j->head_dim_v, g = j->n_head / j->n_head_kv;
    const int kv0 = h0 / g, nkv = (h0 + nh - 1) / g + 1 - kv0; /* kv heads kv0.. */
    int p0[KERN_ATT_BLOCK], n_kv[KERN_ATT_BLOCK];
    for (int b = 0; b < nb; b++) att_range(j, t0 + b, &p0[b], &n_kv[b]);
    const int d = p0[nb - 1] - p0[0], p_end = p0[nb - 1] + n_kv[nb - 1]; /* both rise with b */
#if defined(__x86_64__)
    const int avx2 = j->isa == KERN_ISA_AVX2 && hd % 8 == 0 && hdv % 8 == 0;
#else
    const int avx2 = 0;
#endif
    /* the SIMD leaves (4 heads: AVX-512, or AVX2) read an F16 cache in place */
    const int simd = w == 4 || avx2;
    kv_src K[KERN_ATT_ROWS], V[KERN_ATT_ROWS];
    /* key rows per score call (>= 1: tile_ok), values per tile: the least of the kv heads' */
    int kr = 0, vr = 0, kr_min8 = 1;
    for (int i = 0; i < nkv; i++) {
        K[i] = kv_src_of(j, 0, kv0 + i, simd), V[i] = kv_src_of(j, 1, kv0 + i, simd);
        const int kri = K[i].f32 || K[i].h16 ? KERN_ATT_F32_ROWS : KERN_ATT_TILE / K[i].span - d;
        const int vri = V[i].f32 || V[i].h16 ? KERN_ATT_F32_ROWS : KERN_ATT_TILE / V[i].span;
        kr_min8 &= kri >= 8 && vri >= 8;
        if (!i || kri < kr) kr = kri;
        if (!i || vri < vr) vr = vri;
    }
    if (nkv > 1 && !kr_min8) { /* no common grid of 8: each kv head's own tiles */
        for (int i = 0; i < nkv; i++) {
            int ha, hb;
            att_group_heads(h0, nh, g, kv0 + i, &ha, &hb);
            att_block(j, s, ss, t0, nb, ha, hb - ha, w);
        }
        return;
    }
    if (kr >= 8) kr &= ~7;
    else if (d > 0) {
        for (int b = 0; b < nb; b++) att_block(j, s, ss, t0 + b, 1, h0, nh, w);
        return;
    }
    if (vr >= 8) vr &= ~7;
    if (!ss) ss = (size_t)n_kv[nb - 1];
    float tile[KERN_ATT_TILE];
    float max[KERN_ATT_ROWS], inv[KERN_ATT_ROWS];
    for (int i = 0; i < nb * nh; i++) max[i] = -INFINITY;
    for (int pt = 0; pt < n_kv[nb - 1]; pt += kr) {
        const int r0 = p0[0] + pt, nr = p_end - r0 < kr + d ? p_end - r0 : kr + d;
        for (int i = 0; i < nkv; i++) {
            size_t kst;
            const void *kt = kv_tile(&K[i], tile, r0, nr, &kst);
            int ha, hb;
            att_group_heads(h0, nh, g, kv0 + i, &ha, &hb);
            for (int b = 0; b < nb; b++) {
                if (pt >= n_kv[b]) continue;
                const int nrb = n_kv[b] - pt < kr ? n_kv[b] - pt : kr;
                const size_t kofs = (size_t)(p0[b] - p0[0]) * kst; /* token b's first key in the tile, in values */
                for (int h = ha; h < hb; h += w) {
                    const float *qh = j->q + ((size_t)(t0 + b) * j->n_head + h) * hd;
                    float *sb = s + (size_t)(b * nh + h - h0) * ss, *mx = max + b * nh + h - h0;
#if defined(__x86_64__)
                    const int kh16 = K[i].h16 != NULL;
                    const void *kb = kv_at(kt, kofs, kh16);
                    if (w == 4) {
                        float m4[4];
                        kern_avx512_att_scores4(qh, (size_t)hd, kb, kst, nrb, hd, j->scale, sb + pt, ss, m4, kh16);
                        for (int u = 0; u < 4; u++) mx[u] = m4[u] > mx[u] ? m4[u] : mx[u];
                        continue;
                    }
                    if (avx2) {
                        const float m = kern_avx2_att_scores(qh, kb, kst, nrb, hd, j->scale, sb + pt, kh16);
                        mx[0] = m > mx[0] ? m : mx[0];
                        continue;
                    }
#endif
                    const float *kf = (const float *)kt + kofs; /* not simd: f32 in place or the tile */
                    for (int r = 0; r < nrb; r++) {
                        const float sc = j->ops->dot_f32(qh, kf + (size_t)r * kst, hd) * j->scale;
                        sb[pt + r] = sc;
                        if (sc > mx[0]) mx[0] = sc;
                    }
                }
            }
        }
    }
    for (int b = 0; b < nb; b++) {
        att_rows_softmax(j, s + (size_t)b * nh * ss, ss, nh, n_kv[b], h0, max + b * nh, inv + b * nh);
        if (!avx2 && w == 1) memset(j->out + ((size_t)(t0 + b) * j->n_head + h0) * hdv, 0, (size_t)nh * hdv * sizeof(float));
    }
    for (int r0 = p0[0]; r0 < p_end; r0 += vr) {
        const int nr = p_end - r0 < vr ? p_end - r0 : vr;
        for (int i = 0; i < nkv; i++) {
            size_t vst;
            const void *vt = kv_tile(&V[i], tile, r0, nr, &vst);
            int ha, hb;
            att_group_heads(h0, nh, g, kv0 + i, &ha, &hb);
            for (int b = 0; b < nb; b++) {
                /* token b's keys lo..hi-1 in this tile */
                const int lo = r0 > p0[b] ? r0 : p0[b], hi = r0 + nr < p0[b] + n_kv[b] ? r0 + nr : p0[b] + n_kv[b];
                if (lo >= hi) continue;
                const size_t vofs = (size_t)(lo - r0) * vst;
                for (int h = ha; h < hb; h += w) {
                    const float *sb = s + (size_t)(b * nh + h - h0) * ss + (lo - p0[b]), *iv = inv + b * nh + h - h0;
                    float *o = j->out + ((size_t)(t0 + b) * j->n_head + h) * hdv;
#if defined(__x86_64__)
                    const int vh16 = V[i].h16 != NULL;
                    const void *vb = kv_at(vt, vofs, vh16);
                    if (w == 4) {
                        kern_avx512_att_wsum4(o, (size_t)hdv, sb, ss, iv, vb, vst, hi - lo, hdv, lo > p0[b], vh16);
                        continue;
                    }
                    if (avx2) {
                        kern_avx2_att_wsum(o, sb, iv[0], vb, vst, hi - lo, hdv, lo > p0[b], vh16);
                        continue;
                    }
#endif
                    const float *vf = (const float *)vt + vofs;
                    for (int r = 0; r < hi - lo; r++) j->ops->axpy(o, sb[r] * iv[0], vf + (size_t)r * vst, hdv);
                }
            }
        }
    }
}

/* The four-head leaves (kern_att_avx512.c) run when every kv head's group
 * holds whole quads and the CPU has AVX-512. */
static int att_quads(const att_job *j) {
    return j->isa == KERN_ISA_AVX2 && (j->n_head / j->n_head_kv) % 4 == 0 && j->head_dim % 16 == 0 &&
           j->head_dim_v % 16 == 0 && kern_cpu_avx512vnni();
}

/* Prompt blocks: units u = (kv head, block of nb tokens, head or quad of its
 * group) in that order, so a thread's consecutive units read the same kv
 * head's K/V rows (they stay in L2), taken round-robin (ith, ith + nth,
 * ...): causal work grows with the token, so contiguous ranges would leave
 * the first thread idle.  Each unit is one att_block. */
static void att_block_units(const att_job *j, float *s, size_t ss, long u0, long n, int step) {
    const int w = att_quads(j) ? 4 : 1;
    const int g = j->n_head / j->n_head_kv / w;
    const long nblk = (j->n_tok + j->nb - 1) / j->nb;
    for (long u = u0; u < n; u += step) {
        const long kvh = u / (nblk * g), rem = u % (nblk * g);
        const int t0 = (int)(rem / g) * j->nb, h = (int)(kvh * g + rem % g) * w;
        att_block(j, s, ss, t0, j->n_tok - t0 < j->nb ? j->n_tok - t0 : j->nb, h, w, w);
    }
}

/* Tokens one at a time (decode, or a batch without block scratch): per
 * token each thread takes a contiguous range of its heads (in units of w),
 * in att_block calls of as many heads as rows of `rows` scores fit, so it
 * reads its kv heads' slices of each cache row as one run.  Each head's
 * arithmetic is independent of the partition. */
static void att_token_heads(const att_job *j, float *s, size_t ss, int rows, int ith, int nth) {
    const int w = att_quads(j) ? 4 : 1, units = j->n_head / w;
    const int u0 = (int)((long)units * ith / nth), u1 = (int)((long)units * (ith + 1) / nth);
    int step = rows / w;
    if (step > KERN_ATT_ROWS / w) step = KERN_ATT_ROWS / w;
    if (step < 1) step = 1;
    for (int t = 0; t < j->n_tok; t++)
        for (int u = u0; u < u1; u += step)
            att_block(j, s, ss, t, 1, u * w, (u1 - u < step ? u1 - u : step) * w, w);
}

static void att_worker(void *arg, int ith, int nth) {
    const att_job *j = arg;
    const int w = att_quads(j) ? 4 : 1;
    if (j->nb > 1) {
        const long n = (long)j->n_head_kv * ((j->n_tok + j->nb - 1) / j->nb) * (j->n_head / j->n_head_kv / w);
        if (ith >= n) return;
        size_t have = 0;
        float *s = pool_scratch((pool *)j->E->pool, ith, &have);
        att_block_units(j, s, (size_t)(j->pos + j->n_tok), ith, n, nth);
        return;
    }
    const int units = j->n_head / w;
    if ((long)units * (ith + 1) / nth == (long)units * ith / nth) return; /* no heads for this thread */
    const size_t ss = (size_t)j->E->n_ctx;
    size_t have = 0;
    float *s = scratch_get(j->E, ith, ss * (size_t)w * sizeof(float));
    if (s) {
        pool_scratch((pool *)j->E->pool, ith, &have);
        const size_t rows = have / (ss * sizeof(float));
        att_token_heads(j, s, ss, rows < KERN_ATT_ROWS ? (int)rows : KERN_ATT_ROWS, ith, nth);
    } else {
        float stack_s[w * (j->pos + j->n_tok)]; /* 4 heads' scores, or 1 */
        att_token_heads(j, stack_s, (size_t)(j->pos + j->n_tok), w, ith, nth);
    }
}

/* Store n_tok rows of n values from x (n_tok, n) at dst as rows of `type`
 * (dst_row_bytes each): F32 copied, F16 rounded to nearest even, Q8_0 and
 * Q4_0 with ggml's reference quantizers (quantize_row_*_ref, quant.c), as
 * llama.cpp's ggml_cpy into its cache writes them. */
static void kv_store(int isa, int type, char *dst, size_t dst_row_bytes, const float *x, int n, int n_tok) {
    if (type == CF_F32) {
        memcpy(dst, x, (size_t)n_tok * (size_t)n * sizeof(float));
        return;
    }
    for (int t = 0; t < n_tok; t++) {
        char *d = dst + (size_t)t * dst_row_bytes;
        const float *r = x + (size_t)t * n;
        if (type == CF_F16) isa_ops(isa)->f32_to_f16_row(r, (uint16_t *)(void *)d, n);
        else quant_row(type, r, d, n);
    }
}

int kern_kv_type_supported(int type) {
    return type == CF_F32 || type == CF_F16 || type == CF_Q8_0 || type == CF_Q4_0;
}

size_t kern_kv_row_bytes(int type, int n) {
    if (!kern_kv_type_supported(type) || n <= 0) return 0;
    return kern_row_bytes(type, n);
}

void kern_drv_attention(int isa, cf_env *E, float *out, const float *q, const float *k,
                        const float *v, const float *sinks, int layer, int n_head, int n_head_kv,
                        int head_dim, int head_dim_v, float scale, int window, float softcap,
                        int n_tok) {
    const size_t kv_dim = (size_t)n_head_kv * head_dim, kv_dim_v = (size_t)n_head_kv * head_dim_v;
    const int v_from_k = k && !v;
    const int tk = E->kv_type_k, tv = v_from_k ? tk : E->kv_type_v;
    char *kc = E->kv_k[layer], *vc = v_from_k ? kc : E->kv_v[layer];
    const size_t kb = kern_kv_row_bytes(tk, (int)kv_dim);
    const size_t vb = v_from_k ? kb : kern_kv_row_bytes(tv, (int)kv_dim_v);
    const kern_type_ops *tko = kern_type_ops_get(tk), *tvo = kern_type_ops_get(tv);
    /* a quantized cache needs the tile (att_block) to hold one covering span */
    const int tile_ok = (size_t)head_dim + 62 <= KERN_ATT_TILE && (size_t)head_dim_v + 62 <= KERN_ATT_TILE;
    if (n_head_kv <= 0 || n_head % n_head_kv || E->pos + n_tok > E->n_ctx || !vc || !kb || !vb ||
        !tko || !tvo || ((tk != CF_F32 || tv != CF_F32) && !tile_ok) ||
        (v_from_k && head_dim_v > head_dim)) {
        fill_nan(out, (long)n_tok * n_head * head_dim_v);
        return;
    }
    /* Store first (all threads read every stored row afterwards).  No k, v:
     * an earlier layer of this forward call stored them (shared KV); k but
     * no v: the values are the keys' first head_dim_v floats (latent). */
    if (k) {
        kv_store(isa, tk, kc + (size_t)E->pos * kb, kb, k, (int)kv_dim, n_tok);
        if (v) kv_store(isa, tv, vc + (size_t)E->pos * vb, vb, v, (int)kv_dim_v, n_tok);
    }
    const int ia = kern_isa_available(isa) ? isa : KERN_ISA_SCALAR;
    att_job j = {E, isa_ops(isa), isa, out, q, (const float *)(void *)kc, (const float *)(void *)vc,
                 kv_dim, v_from_k ? kv_dim : kv_dim_v, tk, tv, kc, vc, kb, vb,
                 tko->dequant[ia] ? tko->dequant[ia] : tko->dequant[KERN_ISA_SCALAR],
                 tvo->dequant[ia] ? tvo->dequant[ia] : tvo->dequant[KERN_ISA_SCALAR],
                 n_head, n_head_kv, head_dim, head_dim_v, n_tok, E->pos,
                 v_from_k ? head_dim : head_dim_v, scale, window, softcap, sinks, 1};
    /* prompt batches: blocks of tokens when the pool's scratch holds their
     * score rows (nb tokens x 4 or 1 heads x pos + n_tok floats each) */
    if (n_tok > 1 && E->pool && (tile_ok || (tk == CF_F32 && tv == CF_F32))) {
        size_t have = 0;
        pool_scratch((pool *)E->pool, 0, &have);
        if (have > kern_scratch_bytes(E->n_ctx)) have = kern_scratch_bytes(E->n_ctx); /* rk_mm's beyond */
        const size_t row = (size_t)(att_quads(&j) ? 4 : 1) * (size_t)(E->pos + n_tok) * sizeof(float);
        size_t nb = have / row;
        if (nb > KERN_ATT_BLOCK) nb = KERN_ATT_BLOCK;
        if (nb > (size_t)n_tok) nb = (size_t)n_tok;
        j.nb = nb > 1 ? (int)nb : 1;
    }
    long work = (long)n_tok * n_head * (head_dim + head_dim_v) * (E->pos + n_tok);
    run(E, work, att_worker, &j);
}

/* ---- add, last_row ------------------------------------------------------------ */

void kern_drv_add(cf_env *E, float *y, const float *a, const float *b, int n, int n_tok) {
    (void)E;
    long total = (long)n * n_tok;
    for (long i = 0; i < total; i++) y[i] = a[i] + b[i];
}

void kern_drv_last_row(cf_env *E, float *y, const float *x, int n, int n_tok) {
    (void)E;
    memmove(y, x + (size_t)(n_tok - 1) * n, (size_t)n * sizeof *y);
}

/* ==== public row helpers ===================================================== */

void kern_dequant_row(int type, const void *src, float *dst, int n) {
    kern_dequant_row_isa(KERN_ISA_SCALAR, type, src, dst, n);
}

void kern_dequant_row_isa(int isa, int type, const void *src, float *dst, int n) {
    const kern_type_ops *t = kern_type_ops_get(type);
    if (!t || !kern_isa_available(isa) || !t->dequant[isa] || n % t->blck) {
        fill_nan(dst, n);
        return;
    }
    t->dequant[isa](src, dst, n);
}

float kern_dot_row(int isa, int type, const void *w_row, const float *x, int n) {
    const kern_type_ops *t = kern_type_ops_get(type);
    if (!t || !kern_isa_available(isa) || !t->dequant[isa] || n % t->blck) return NAN;
    float y;
    const mm_job j = {NULL, isa_ops(isa), t, isa, &y, x, w_row, type, 1, n, 1, kern_row_bytes(type, n)};
    mm_vec_rows(&j, 0, 1);
    return y;
}

float kern_f16_to_f32(uint16_t h) { return f16_to_f32(h); }
uint16_t kern_f32_to_f16(float f) { return f32_to_f16(f); }

void kern_f16_to_f32_row(int isa, const uint16_t *src, float *dst, int n) {
    if (!kern_isa_available(isa)) isa = KERN_ISA_SCALAR;
    isa_ops(isa)->f16_to_f32_row(src, dst, n);
}

void kern_f32_to_f16_row(int isa, const float *src, uint16_t *dst, int n) {
    if (!kern_isa_available(isa)) isa = KERN_ISA_SCALAR;
    isa_ops(isa)->f32_to_f16_row(src, dst, n);
}
