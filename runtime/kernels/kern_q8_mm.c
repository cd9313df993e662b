/*
 * kern_q8_mm.c — the act_quant matmul driver (kern_q8.h): activations
 * converted to the weight type's vec_dot_type, integer dots from the leaves
 * of kern_q8.c / kern_q8_avx2.c.
 *
 * Activation rows are converted once per call, on the calling thread, into
 * thread 0's pool scratch (after the kern_scratch_bytes(n_ctx) the other
 * kernels use; all threads then read them).  n_tokens > 1 is
 * a mat-mat: threads take Q8_ROWS-row tiles; per tile it walks the tokens
 * KERN_Q8_NT at a time and calls the 4-token leaf for each row, so each
 * weight block is decoded once per 4 tokens while the tile's rows stay in
 * L2.  The 32-element types (Q8_0/Q8_1 activations) take
 * their tokens as kern_block_q8x4 — 4 tokens' blocks interleaved with f32
 * scales — so their leaf scales 4 tokens with one vector op
 * (kern_gemm4_fn); the 256-element types read the Q8_K rows directly
 * (kern_dot_q_fn, nt <= 4).  A row's result is one leaf call: results do
 * not depend on the thread count.
 *
 * n_tokens == 1 is a mat-vec over contiguous row ranges per thread that
 * does each row's float work exactly as the mat-mat does it for one token —
 * gemv4 (4 weight rows against the token in slot 0 of a kern_block_q8x4
 * group: gemm4's transpose) for the 32-element types, the same dot_q for the
 * others — so a decoded token's outputs are the bits it gets in any batch
 * (kern.h, batch invariance).  A token whose Q8 scales overflowed f16 is recomputed with
 * f32 activations after the integer pass (kern_q8.h, Range).
 */
#include "kern_q8.h"
#include "kern_half.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/f16.h"
#include "base/pool.h"

/* ==== activation formats ===================================================== */

typedef struct {
    int blck, type_size;
    kern_quant_fn quant[KERN_ISA_COUNT];
} act_format;

static const act_format *act_format_get(int vdt) {
    static const act_format q8_0 = {KERN_QK, (int)sizeof(kern_block_q8_0),
                                    {kern_sc_quantize_q8_0, KERN_SIMD(kern_avx2_quantize_q8_0, kern_sc_quantize_q8_0)}};
    static const act_format q8_1 = {KERN_QK, (int)sizeof(kern_block_q8_1),
                                    {kern_sc_quantize_q8_1, KERN_SIMD(kern_avx2_quantize_q8_1, kern_sc_quantize_q8_1)}};
    static const act_format q8_k = {KERN_QK_K, (int)sizeof(kern_block_q8_k),
                                    {kern_sc_quantize_q8_k, KERN_SIMD(kern_avx2_quantize_q8_k, kern_sc_quantize_q8_k)}};
    static const act_format f16 = {1, 2, {kern_sc_quantize_f16, KERN_SIMD(kern_avx2_quantize_f16, kern_sc_quantize_f16)}};
    static const act_format bf16 = {1, 2, {kern_sc_quantize_bf16, kern_sc_quantize_bf16}};
    switch (vdt) {
    case CF_Q8_0: return &q8_0;
    case KERN_T_Q8_1: return &q8_1;
    case KERN_T_Q8_K: return &q8_k;
    case CF_F16: return &f16;
    case CF_BF16: return &bf16;
    default: return NULL;
    }
}

/* ==== public helpers (kern.h) ===================================================== */

int kern_vec_dot_type(int type) {
    const kern_type_ops *t = kern_type_ops_get(type);
    return t ? t->vec_dot_type : -1;
}

size_t kern_act_row_bytes(int type, int n) {
    const kern_type_ops *t = kern_type_ops_get(type);
    if (!t || n < 0) return 0;
    if (t->vec_dot_type == CF_F32) return (size_t)n * sizeof(float);
    const act_format *f = act_format_get(t->vec_dot_type);
    if (!f || n % f->blck || n % t->blck) return 0;
    return (size_t)(n / f->blck) * (size_t)f->type_size;
}

int kern_quantize_act_row(int isa, int type, const float *x, void *dst, int n) {
    const kern_type_ops *t = kern_type_ops_get(type);
    if (!t || !kern_isa_available(isa) || !kern_act_row_bytes(type, n)) return -1;
    if (t->vec_dot_type == CF_F32) {
        memcpy(dst, x, (size_t)n * sizeof(float));
        return 0;
    }
    act_format_get(t->vec_dot_type)->quant[isa](x, dst, n);
    return 0;
}

int kern_dot_q_rows(int isa, int type, const void *w_row, const void *a, size_t a_stride, int nt,
                    int n, float *s) {
    const kern_type_ops *t = kern_type_ops_get(type);
    if (!t || !t->dot_q[isa] || !kern_isa_available(isa) || nt < 1 || nt > KERN_Q8_NT ||
        n % t->blck)
        return -1;
    t->dot_q[isa](w_row, a, a_stride, nt, n, s);
    return 0;
}

/* Activation rows are stored as float for F16/BF16 (rounded, then the f32
 * kernels run), so 4 bytes per element bounds every format. */
static size_t act_buf_row_bytes(int n_in) { return (size_t)n_in * sizeof(float); }

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t kern_scratch_bytes_act(int n_ctx, int n_batch, int n_in_max) {
    /* at least 2 rows: one 4-token kern_block_q8x4 group (5.5 bytes per
     * element) is what a single token takes */
    size_t rows = (size_t)(n_batch > 2 ? n_batch : 2);
    return align64(kern_scratch_bytes(n_ctx)) + rows * act_buf_row_bytes(n_in_max > 0 ? n_in_max : 0);
}

/* ==== the act_quant matmul driver ==================================================== */

#define Q8_ROWS 16   /* output rows per mat-mat tile */
#define Q8_PAR_MIN_WORK 32768L /* as kern.c: below this, one thread */
#define Q8_STACK_BYTES (128 * 1024)

typedef struct {
    kern_dot_q_fn dot;
    kern_gemm4_fn gemm4; /* non-NULL: a holds kern_block_q8x4 groups of 4 tokens */
    kern_gemv4_fn gemv4; /* with gemm4: the mat-vec leaf */
    float *y;
    const uint8_t *w, *a;
    size_t w_row_bytes, a_row_bytes;
    int wblck, wtsize, ablck, atsize;
    int n_out, n_in, n_tok;
} q8_job;

/* Mat-vec rows [r0, r1) of one token through the leaf whose per-row
 * arithmetic is the mat-mat leaf's for one token: gemv4 for the gemm4 types,
 * the same dot_q otherwise.  So a decoded token's results are bit-identical
 * to its results in a batch.  (Neither worker slices the input: measured on
 * 4096 x 4096 Q4_K and Q4_1, 1 thread, whole rows were 10-20% faster for 64
 * tokens than 1024-wide slices, and slices cost the mat-vec a call each.) */
static void q8_vec_rows(const q8_job *j, long r0, long r1) {
    float s[4];
    long r = r0;
    if (!j->gemv4) {
        for (; r < r1; r++) j->dot(j->w + (size_t)r * j->w_row_bytes, j->a, 0, 1, j->n_in, j->y + r);
        return;
    }
    /* the 4 rows of a call are a quarter of the range apart, each its own
     * sequential stream: neighbouring rows (two streams in a 4 KiB page) ran
     * 2-3x slower from DRAM (kern.c, mm_vec_rows) */
    const long part = (r1 - r0) / 4;
    for (; r < r0 + part; r++) {
        j->gemv4(j->w + (size_t)r * j->w_row_bytes, (size_t)part * j->w_row_bytes, j->a, j->n_in, s);
        for (int i = 0; i < 4; i++) j->y[r + i * part] = s[i];
    }
    for (r = r0 + 4 * part; r < r1; r++) { /* the last rows: one row in all four lanes */
        j->gemv4(j->w + (size_t)r * j->w_row_bytes, 0, j->a, j->n_in, s);
        j->y[r] = s[0];
    }
}

static void q8_vec_worker(void *arg, int ith, int nth) {
    const q8_job *j = arg;
    q8_vec_rows(j, (long)j->n_out * ith / nth, (long)j->n_out * (ith + 1) / nth);
}

static void q8_mat_worker(void *arg, int ith, int nth) {
    const q8_job *j = arg;
    const long n_tiles = (j->n_out + Q8_ROWS - 1) / Q8_ROWS;
    const long t0 = n_tiles * ith / nth, t1 = n_tiles * (ith + 1) / nth;
    float s[KERN_Q8_NT];
    for (long tl = t0; tl < t1; tl++) {
        const int r0 = (int)(tl * Q8_ROWS);
        const int r1 = j->n_out - r0 < Q8_ROWS ? j->n_out : r0 + Q8_ROWS;
        for (int tb = 0; tb < j->n_tok; tb += KERN_Q8_NT) {
            const int nt = j->n_tok - tb < KERN_Q8_NT ? j->n_tok - tb : KERN_Q8_NT;
            /* gemm4: a_row_bytes is one token's share of a 4-token group */
            const uint8_t *a = j->a + (size_t)tb * j->a_row_bytes;
            for (int r = r0; r < r1; r++) {
                if (j->gemm4) j->gemm4(j->w + (size_t)r * j->w_row_bytes, a, j->n_in, s);
                else j->dot(j->w + (size_t)r * j->w_row_bytes, a, j->a_row_bytes, nt, j->n_in, s);
                float *yr = j->y + (size_t)tb * (size_t)j->n_out + r;
                for (int t = 0; t < nt; t++) yr[(size_t)t * j->n_out] = s[t];
            }
        }
    }
}

/* Converted rows for n_tok tokens go to `buf`; returns how many tokens fit. */
static int act_buffer(cf_env *E, size_t row_bytes, int n_tok, uint8_t **buf) {
    size_t have = 0;
    uint8_t *p = pool_scratch((pool *)E->pool, 0, &have);
    size_t off = align64(kern_scratch_bytes(E->n_ctx));
    if (p && have >= off + row_bytes) {
        size_t fit = (have - off) / row_bytes;
#ifdef CINFER_TEST_BUILD
        if (fit < (size_t)n_tok && !kern_test_allow_small_scratch) {
            fprintf(stderr, "kern: pool scratch %zu bytes < %zu needed for act_quant; call "
                            "pool_reserve(pool, kern_scratch_bytes_act(n_ctx, n_batch, n_in_max))\n",
                    have, off + row_bytes * (size_t)n_tok);
            abort();
        }
        if (fit < (size_t)n_tok) kern_test_note_fallback();
#endif
        *buf = p + off;
        return fit < (size_t)n_tok ? (int)fit : n_tok;
    }
#ifdef CINFER_TEST_BUILD
    if (E->pool && !kern_test_allow_small_scratch) {
        fprintf(stderr, "kern: no pool scratch for act_quant; call pool_reserve(pool, "
                        "kern_scratch_bytes_act(n_ctx, n_batch, n_in_max))\n");
        abort();
    }
    if (E->pool) kern_test_note_fallback();
#endif
    *buf = NULL;
    return 0;
}

/* F16 / BF16 weights: x rounded to the format as ggml does (vec_dot_type
 * F16/BF16), kept as floats for the f32 kernels.  An element beyond the f16
 * range stays the f32 value it is: ggml would turn it into inf and every
 * logit into NaN; the exact value is the closest answer (no parity to keep). */
static void round_rows(int isa, const kern_type_ops *ty, const act_format *af, const float *x,
                       float *xr, int n_in, int n_tok) {
    for (int t = 0; t < n_tok; t++) {
        const float *xt = x + (size_t)t * n_in;
        float *rt = xr + (size_t)t * n_in;
        uint16_t h[256];
        for (int k0 = 0; k0 < n_in; k0 += 256) {
            const int kc = n_in - k0 < 256 ? n_in - k0 : 256;
            af->quant[isa](xt + k0, h, kc);
            if (ty->vec_dot_type == CF_BF16) {
                for (int k = 0; k < kc; k++) rt[k0 + k] = bf16_to_f32(h[k]);
            } else {
                kern_f16_to_f32_row(isa, h, rt + k0, kc);
                for (int k = 0; k < kc; k++)
                    if (isinf(rt[k0 + k]) && !isinf(xt[k0 + k])) rt[k0 + k] = xt[k0 + k];
            }
        }
    }
}

static void q8_run_chunk(int isa, cf_env *E, const kern_type_ops *ty, const act_format *af,
                         float *y, const float *x, const void *w, int type, int n_out, int n_in,
                         int n_tok, uint8_t *buf) {
    if (!ty->dot_q[isa]) { /* F16 / BF16: round x to the format */
        if (n_in >= 16 && kern_half_available(isa, type)) { /* BF16 on AVX512_BF16: the f32 kernels' bits */
            const size_t ab = kern_half_act_bytes(n_in); /* <= act_buf_row_bytes for n_in >= 16 */
            for (int t = 0; t < n_tok; t++) kern_half_pack_act(x + (size_t)t * n_in, buf + (size_t)t * ab, n_in);
            kern_half_matmul(isa, E, y, buf, w, type, n_out, n_in, n_tok);
            return;
        }
        /* elsewhere: the f32 kernels on the rounded values */
        round_rows(isa, ty, af, x, (float *)buf, n_in, n_tok);
        kern_matmul_f32act(isa, E, y, (const float *)buf, w, type, n_out, n_in, n_tok);
        return;
    }
    kern_gemm4_fn gemm4 = ty->gemm4[isa];
    size_t arb = (size_t)(n_in / af->blck) * (size_t)af->type_size;
    const int nb = n_in / KERN_QK;
    if (gemm4) { /* 4-token interleaved blocks (one token: slot 0), 8 blocks of 4 rows at a time */
        arb = (size_t)nb * sizeof(kern_block_q8x4) / 4;
        for (int tb = 0; tb < n_tok; tb += 4) {
            kern_block_q8x4 *out = (kern_block_q8x4 *)(buf + (size_t)tb * arb);
            for (int b0 = 0; b0 < nb; b0 += 8) {
                const int bc = nb - b0 < 8 ? nb - b0 : 8;
                kern_block_q8_1 tmp[4][8]; /* Q8_0 blocks fit too */
                const void *rows[4];
                for (int k = 0; k < 4; k++) {
                    rows[k] = tb + k < n_tok ? tmp[k] : NULL;
                    if (rows[k])
                        af->quant[isa](x + (size_t)(tb + k) * n_in + (size_t)b0 * KERN_QK, tmp[k],
                                       bc * KERN_QK);
                }
                kern_q8x4_pack(ty->vec_dot_type, rows, bc * KERN_QK, out + b0);
            }
        }
    } else {
        for (int t = 0; t < n_tok; t++) af->quant[isa](x + (size_t)t * n_in, buf + (size_t)t * arb, n_in);
    }
    q8_job j = {ty->dot_q[isa], gemm4, ty->gemv4[isa], y, w, buf, kern_row_bytes(type, n_in), arb,
                ty->blck, ty->type_size, af->blck, af->type_size, n_out, n_in, n_tok};
    void (*fn)(void *, int, int) = n_tok == 1 ? q8_vec_worker : q8_mat_worker;
    if ((long)n_out * n_in * n_tok < Q8_PAR_MIN_WORK) fn(&j, 0, 1);
    else pool_run((pool *)E->pool, fn, &j);
    /* Q8_K keeps an f32 d; Q8_0/Q8_1 tokens whose f16 scales overflowed get
     * exact f32 activations instead — a per-token choice, so batch-invariant. */
    if (gemm4)
        for (int t = 0; t < n_tok; t++)
            if (kern_q8x4_overflows((const kern_block_q8x4 *)(buf + (size_t)(t & ~3) * arb), nb, t % 4))
                kern_matmul_f32act(isa, E, y + (size_t)t * n_out, x + (size_t)t * n_in, w, type, n_out,
                                   n_in, 1);
}

void kern_q8_matmul(int isa, cf_env *E, float *y, const float *x, const void *w, int type,
                    int n_out, int n_in, int n_tok) {
    const kern_type_ops *ty = kern_type_ops_get(type);
    const act_format *af = ty ? act_format_get(ty->vec_dot_type) : NULL;
    if (!af || n_in % ty->blck || n_in % af->blck) {
        kern_matmul_f32act(isa, E, y, x, w, type, n_out, n_in, n_tok);
        return;
    }
    /* per token: F16/BF16 keep rounded floats; Q8 rows (or their share of a
     * 4-token kern_block_q8x4 group) are smaller */
    size_t row_bytes = act_buf_row_bytes(n_in);
    if (ty->gemm4[isa]) row_bytes = (size_t)(n_in / KERN_QK) * sizeof(kern_block_q8x4) / 4;
    else if (ty->dot_q[isa]) row_bytes = (size_t)(n_in / af->blck) * (size_t)af->type_size;
    /* the gemm4 layout takes whole 4-token groups */
    const int round4 = ty->gemm4[isa] != NULL, need = round4 ? (n_tok + 3) & ~3 : n_tok;
    uint8_t *buf;
    int chunk = act_buffer(E, row_bytes, need, &buf);
    if (buf) {
        chunk = chunk >= need ? n_tok : round4 ? chunk & ~3 : chunk;
        if (chunk < 1) buf = NULL;
    }
    if (!buf) { /* no pool scratch: tokens in chunks through a stack buffer (tests, tools) */
        _Alignas(64) uint8_t stack_buf[Q8_STACK_BYTES];
        chunk = (int)(sizeof stack_buf / row_bytes);
        chunk = chunk >= need ? n_tok : round4 ? chunk & ~3 : chunk;
        if (chunk < 1) { /* one row (or group) does not fit: exact f32 activations */
            kern_matmul_f32act(isa, E, y, x, w, type, n_out, n_in, n_tok);
            return;
        }
        for (int t0 = 0; t0 < n_tok; t0 += chunk) {
            const int nt = n_tok - t0 < chunk ? n_tok - t0 : chunk;
            q8_run_chunk(isa, E, ty, af, y + (size_t)t0 * n_out, x + (size_t)t0 * n_in, w, type,
                         n_out, n_in, nt, stack_buf);
        }
        return;
    }
    for (int t0 = 0; t0 < n_tok; t0 += chunk) {
        const int nt = n_tok - t0 < chunk ? n_tok - t0 : chunk;
        q8_run_chunk(isa, E, ty, af, y + (size_t)t0 * n_out, x + (size_t)t0 * n_in, w, type, n_out,
                     n_in, nt, buf);
    }
}
