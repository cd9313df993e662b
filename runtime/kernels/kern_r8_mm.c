/*
 * kern_r8_mm.c — repacking into the row-interleaved types CF_Q4_0_R8 /
 * CF_Q8_0_R8 (kern_r8.h) and the matmul driver of their integer (act_quant)
 * path; the leaves are kern_r8.c, kern_r8_avx2.c and kern_r8_vnni.c.
 *
 * The integer driver.  A call is one or more weights of one input (the
 * parts; cf_kernels.matmul_n), their row groups numbered in order.
 * Activations are quantized to Q8_0 and packed into 4-token
 * kern_block_q8x4 quads once per call (threads split the quads), into
 * thread 0's pool scratch after the kern_scratch_bytes(n_ctx) the other
 * kernels use — the same place and budget as kern_q8_mm.c
 * (kern_scratch_bytes_act covers it: a quad takes 44 bytes per 32 elements
 * and token, less than the 4 bytes per element reserved); up to 4 tokens
 * (decode) every pool slot converts its own copy into its own scratch at
 * the same offset instead (r8_mm_worker).  Threads then take ranges of row
 * groups.  Within its range a thread walks blocks of row groups whose weights
 * fit R8_WBLOCK bytes and, for each, blocks of tokens whose activations fit
 * R8_ABLOCK bytes, so both stay in L2 while the leaf runs every group of the
 * block against every KERN_R8_NT-token slice: from R8_GEMM2_MIN_TOK tokens
 * on, where the impl has one, the gemm2 leaf on pairs of groups (the blocks
 * and takes are even), the one-group leaf for a last odd group.  The ranges
 * are takes from the front of the thread's own segment, then from the back
 * of the others' (kern_r8.h "takes").
 * Every (row, token) result is one leaf's sum over all blocks in order, and
 * every leaf gives the scalar reference's bits, so results depend neither
 * on the thread count nor on how tokens and groups are blocked.
 */
#include "kern_r8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/pool.h"
#include "kern_rk.h"
#include "quant.h"

#define R8_WBLOCK (256 * 1024) /* weight bytes per row-group block (L2) */
#define R8_ABLOCK (192 * 1024) /* activation bytes per token block (L2) */
#define R8_STACK_BYTES (128 * 1024)
#define R8_PAR_MIN_WORK 32768L
/* gemm2 (two row groups per call, VNNI) from this many tokens: on one
 * token it runs at 0.6x the 8-row leaf (L2-resident leaf timing, 32 blocks:
 * 73 vs 126 GFLOP/s), from 2 tokens at 1.0-1.6x; the same bits either way. */
#define R8_GEMM2_MIN_TOK 2

/* ==== repack ========================================================================== */

/* One group's 8 native rows (ggml Q4_0 / Q8_0, row stride rb bytes) -> R8 blocks. */
static void shuffle_group(int dst_type, const uint8_t *src, size_t rb, int nb, uint8_t *dst) {
    const int bb = kern_r8_block_bytes(dst_type);
    const int nbytes = dst_type == CF_Q4_0_R8 ? 16 : 32; /* quant bytes per native block */
    const size_t sb = dst_type == CF_Q4_0_R8 ? sizeof(kern_block_q4_0) : sizeof(kern_block_q8_0);
    for (int b = 0; b < nb; b++, dst += bb)
        for (int r = 0; r < 8; r++) {
            const uint8_t *blk = src + (size_t)r * rb + (size_t)b * sb;
            memcpy(dst + 2 * r, blk, 2); /* d */
            for (int c = 0; c < nbytes / 4; c++) memcpy(dst + 16 + 32 * c + 4 * r, blk + 2 + 4 * c, 4);
        }
}

int kern_repack(int dst_type, int src_type, const void *src, int n_rows, int n_cols, void *dst,
                char *err, size_t err_len) {
    if (kern_rk_block_bytes(dst_type))
        return kern_rk_repack(dst_type, src_type, src, n_rows, n_cols, dst, err, err_len);
    const size_t total = kern_repack_bytes(dst_type, n_rows, n_cols);
    if (!total) {
        if (err && err_len)
            snprintf(err, err_len, "repack to %s: %d x %d not supported (need an R8 type, rows %% 8 == 0, "
                     "columns %% 32 == 0)", kern_type_is_r8(dst_type) ? (dst_type == CF_Q4_0_R8 ? "q4_0_r8" : "q8_0_r8") : "?",
                     n_rows, n_cols);
        return -1;
    }
    if (!kern_type_supported(src_type) || (kern_type_is_r8(src_type) && src_type != dst_type) ||
        (!kern_type_is_r8(src_type) && n_cols % kern_type_block(src_type))) {
        if (err && err_len)
            snprintf(err, err_len, "repack: source type %d with %d columns cannot become type %d",
                     src_type, n_cols, dst_type);
        return -1;
    }
    if (src_type == dst_type) {
        memcpy(dst, src, total);
        return 0;
    }
    const int nb = n_cols / 32, bb = kern_r8_block_bytes(dst_type);
    const int native = dst_type == CF_Q4_0_R8 ? CF_Q4_0 : CF_Q8_0;
    const size_t nrb = kern_row_bytes(native, n_cols), grp = (size_t)nb * bb;
    if (src_type == native) {
        for (int g = 0; g < n_rows / 8; g++)
            shuffle_group(dst_type, (const uint8_t *)src + (size_t)g * 8 * nrb, nrb, nb,
                          (uint8_t *)dst + (size_t)g * grp);
        return 0;
    }
    /* other sources: exact f32, then ggml's reference quantizer, then the shuffle */
    const size_t srb = kern_row_bytes(src_type, n_cols);
    float *f = malloc((size_t)n_cols * sizeof(float));
    uint8_t *rows = malloc(8 * nrb);
    if (!f || !rows) {
        free(f);
        free(rows);
        if (err && err_len) snprintf(err, err_len, "repack: out of memory");
        return -1;
    }
    for (int g = 0; g < n_rows / 8; g++) {
        for (int r = 0; r < 8; r++) {
            kern_dequant_row(src_type, (const uint8_t *)src + (size_t)(8 * g + r) * srb, f, n_cols);
            quant_row(native, f, rows + (size_t)r * nrb, n_cols);
        }
        shuffle_group(dst_type, rows, nrb, nb, (uint8_t *)dst + (size_t)g * grp);
    }
    free(f);
    free(rows);
    return 0;
}

/* ==== the integer (act_quant) driver ==================================================== */

/* One weight of a call (kern_r8_matmul_n: up to CF_MATMUL_N_MAX, one input). */
typedef struct {
    kern_r8_gemm_fn gemm, gemm2; /* gemm2: two groups per call, or NULL */
    float *y;
    const uint8_t *w;
    int n_out, bb;
    long g0; /* its first row group in the call's numbering (the weights' groups in order) */
} r8_part;

typedef struct {
    int isa;          /* quantizer */
    const float *x;
    kern_block_q8x4 *a; /* n_quads quads of nb blocks */
    int n_in, n_tok, nb, n_part;
    int own_act;        /* decode: each pool slot converts the activations into its own scratch */
    pool *pool;
    size_t act_off;     /* ... at this offset */
    r8_part part[CF_MATMUL_N_MAX];
    kern_r8_takes takes;
} r8_job;

/* What one slot's takes read: the job and the activations (own_act: NULL
 * until its first take converts them into dst). */
typedef struct {
    const r8_job *j;
    const kern_block_q8x4 *a;
    kern_block_q8x4 *dst;
} r8_slot;


/* quads [q0, q1): quantize the tokens to Q8_0 (8 blocks at a time) and interleave into a */
static void r8_quant_quads(const r8_job *j, kern_block_q8x4 *a, long q0, long q1) {
    /* every ISA's quantizer writes the same bytes; NEON uses the scalar one */
    const kern_quant_fn quant = j->isa == KERN_ISA_SIMD ? KERN_SIMD(kern_avx2_quantize_q8_0, kern_sc_quantize_q8_0)
                                                        : kern_sc_quantize_q8_0;
    for (long q = q0; q < q1; q++) {
        kern_block_q8x4 *out = a + (size_t)q * j->nb;
        for (int b0 = 0; b0 < j->nb; b0 += 8) {
            const int bc = j->nb - b0 < 8 ? j->nb - b0 : 8;
            kern_block_q8_0 tmp[4][8];
            const void *rows[4];
            for (int k = 0; k < 4; k++) {
                const long t = 4 * q + k;
                rows[k] = t < j->n_tok ? tmp[k] : NULL;
                if (rows[k]) quant(j->x + (size_t)t * j->n_in + (size_t)b0 * 32, tmp[k], bc * 32);
            }
            kern_q8x4_pack(CF_Q8_0, rows, bc * 32, out + b0);
        }
    }
}

static void r8_quant_worker(void *arg, int ith, int nth) {
    const r8_job *j = arg;
    const long nq = (j->n_tok + 3) / 4;
    r8_quant_quads(j, j->a, nq * ith / nth, nq * (ith + 1) / nth);
}

/* Row groups [g0, g1) of one weight, every token. */
static void r8_part_range(const r8_job *j, const kern_block_q8x4 *a, const r8_part *pt, long g0, long g1) {
    const size_t grp = (size_t)j->nb * pt->bb;
    const size_t quad = (size_t)j->nb * sizeof(kern_block_q8x4);
    long gstep = (long)(R8_WBLOCK / grp);
    if (gstep < 1) gstep = 1;
    if (pt->gemm2) gstep = gstep < 2 ? 2 : gstep & ~1L;
    int tstep = (int)(R8_ABLOCK / quad) * 4; /* tokens per activation block */
    if (tstep < KERN_R8_NT) tstep = KERN_R8_NT;
    tstep -= tstep % KERN_R8_NT;
    for (long gb = g0; gb < g1; gb += gstep) {
        const long ge = gb + gstep < g1 ? gb + gstep : g1;
        for (int tb = 0; tb < j->n_tok; tb += tstep) {
            const int te = tb + tstep < j->n_tok ? tb + tstep : j->n_tok;
            for (long g = gb; g < ge;) {
                const int two = pt->gemm2 && g + 1 < ge;
                const kern_r8_gemm_fn fn = two ? pt->gemm2 : pt->gemm;
                for (int t = tb; t < te; t += KERN_R8_NT) {
                    const int nt = te - t < KERN_R8_NT ? te - t : KERN_R8_NT;
                    fn(pt->w + (size_t)g * grp, a + (size_t)(t / 4) * j->nb, (size_t)j->nb, j->nb, nt,
                       pt->y + (size_t)t * pt->n_out + 8 * g, (size_t)pt->n_out);
                }
                g += two ? 2 : 1;
            }
        }
    }
}

/* Groups [g0, g1) of the call: the parts of the weights they cover. */
static void r8_mm_range(void *slot, long g0, long g1) {
    r8_slot *sl = slot;
    const r8_job *j = sl->j;
    if (!sl->a) {
        r8_quant_quads(j, sl->dst, 0, 1);
        sl->a = sl->dst;
    }
    for (int i = 0; i < j->n_part; i++) {
        const r8_part *pt = &j->part[i];
        const long lo = g0 > pt->g0 ? g0 : pt->g0, e = pt->g0 + pt->n_out / 8, hi = g1 < e ? g1 : e;
        if (lo < hi) r8_part_range(j, sl->a, pt, lo - pt->g0, hi - pt->g0);
    }
}

/* own_act (decode): each slot converts the token(s) into its own scratch —
 * slot 0 first thing (its copy is j->a, which the overflow check reads
 * after the run), the others at their first take (a late one that finds
 * nothing left converts nothing).
 * Otherwise the owner converts them alone while the others wait, and its
 * writes take back the lines the other cores read in the last call: in
 * decode that pack ran ~5x slower at 2 threads than at 1 (perf, 336M Q4_0
 * tg: 4.3 % of the samples against 0.9 %). */
static void r8_mm_worker(void *arg, int ith, int nth) {
    r8_job *j = arg;
    (void)nth;
    r8_slot sl = {j, j->a, NULL};
    if (j->own_act && ith == 0) r8_quant_quads(j, j->a, 0, 1);
    else if (j->own_act) {
        sl.dst = (kern_block_q8x4 *)((uint8_t *)pool_scratch(j->pool, ith, NULL) + j->act_off);
        sl.a = NULL;
    }
    kern_r8_takes_run(&j->takes, ith, r8_mm_range, &sl);
}

static void r8_run(cf_env *E, long work, void (*fn)(void *, int, int), void *arg) {
    if (work < R8_PAR_MIN_WORK) fn(arg, 0, 1);
    else pool_run((pool *)E->pool, fn, arg);
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static void r8_q8_matmul(int impl, cf_env *E, int n, float *const *y, const float *x, const void *const *w,
                         const int *type, const int *n_out, int n_in, int n_tok) {
    const int nb = n_in / 32;
    const size_t quad = (size_t)nb * sizeof(kern_block_q8x4);
    const int n_quads = (n_tok + 3) / 4;
    const kern_r8_leaves *lv = kern_r8_leaves_for(impl);
    r8_job j = {.isa = impl == KERN_R8_SCALAR ? KERN_ISA_SCALAR : KERN_ISA_AVX2,
                .x = x, .n_in = n_in, .n_tok = n_tok, .nb = nb, .n_part = n};
    long n_groups = 0, rows = 0;
    int pairs = 0;
    for (int i = 0; i < n; i++) {
        const int ti = type[i] == CF_Q8_0_R8;
        j.part[i] = (r8_part){.gemm = lv->gemm[ti], .gemm2 = n_tok >= R8_GEMM2_MIN_TOK ? lv->gemm2[ti] : NULL,
                              .w = w[i], .n_out = n_out[i], .bb = kern_r8_block_bytes(type[i])};
        if (j.part[i].gemm2) n_groups = (n_groups + 1) & ~1L; /* pairs stay pairs (a group number unused) */
        j.part[i].g0 = n_groups;
        n_groups += n_out[i] / 8;
        rows += n_out[i];
        pairs |= j.part[i].gemm2 != NULL;
    }
    /* the converted activations: thread 0's scratch after the attention/tile area */
    size_t have = 0;
    uint8_t *p = pool_scratch((pool *)E->pool, 0, &have);
    const size_t off = align64(kern_scratch_bytes(E->n_ctx));
    long fit = p && have >= off + quad ? (long)((have - off) / quad) : 0;
#ifdef CINFER_TEST_BUILD
    if (E->pool && fit < n_quads && !kern_test_allow_small_scratch) {
        fprintf(stderr, "kern: pool scratch %zu bytes < %zu needed for act_quant; call pool_reserve(pool, "
                        "kern_scratch_bytes_act(n_ctx, n_batch, n_in_max))\n", have, off + quad * n_quads);
        abort();
    }
    if (E->pool && fit < n_quads) kern_test_note_fallback();
#endif
    _Alignas(64) uint8_t stack_buf[R8_STACK_BYTES];
    uint8_t *buf = p ? p + off : NULL;
    if (fit < 1) { /* no pool scratch: quads through the stack buffer (tests, tools) */
        fit = (long)(sizeof stack_buf / quad);
        buf = stack_buf;
        if (fit < 1) { /* one quad does not fit (n_in > ~23k): exact f32 activations */
            kern_matmul_f32act_n(j.isa, E, n, y, x, w, type, n_out, n_in, 0, n_tok);
            return;
        }
    }
    const int chunk = fit >= n_quads ? n_tok : (int)fit * 4;
    /* own_act needs one quad in every slot's scratch, after the same offset */
    const int own_fits = p && buf == p + off && kern_r8_slots_fit((pool *)E->pool, off, quad);
    j.pool = (pool *)E->pool;
    j.act_off = off;
    for (int t0 = 0; t0 < n_tok; t0 += chunk) {
        const int nt = n_tok - t0 < chunk ? n_tok - t0 : chunk;
        for (int i = 0; i < n; i++) j.part[i].y = y[i] + (size_t)t0 * n_out[i];
        j.x = x + (size_t)t0 * n_in;
        j.n_tok = nt;
        j.a = (kern_block_q8x4 *)buf;
        const long work = rows * n_in * nt;
        kern_r8_takes_reset(&j.takes, n_groups, work < R8_PAR_MIN_WORK ? 1 : pool_n_threads((pool *)E->pool), pairs);
        /* the quantize splits by quads of 4 tokens: up to 4 tokens (decode)
         * every slot of the matmul's run converts its own copy, first */
        j.own_act = nt <= 4 && own_fits;
        if (!j.own_act) r8_run(E, nt > 4 ? (long)nt * n_in * 8 : 0, r8_quant_worker, &j);
        r8_run(E, work, r8_mm_worker, &j);
        for (int t = 0; t < nt; t++) /* a token whose Q8_0 scales overflowed: f32 activations */
            if (kern_q8x4_overflows(j.a + (size_t)(t / 4) * nb, nb, t % 4))
                kern_matmul_f32act_n(j.isa, E, n, y, x, w, type, n_out, n_in, t0 + t, 1);
    }
}

static void fill_nan(float *y, long n) {
    for (long i = 0; i < n; i++) y[i] = NAN;
}

void kern_r8_matmul_n_impl(int impl, cf_env *E, int n, float *const *y, const float *x, const void *const *w,
                           const int *type, const int *n_out, int n_in, int n_tok) {
    int ok = n >= 1 && n <= CF_MATMUL_N_MAX && n_in % 32 == 0 && n_in > 0 && kern_r8_impl_available(impl);
    for (int i = 0; ok && i < n; i++) ok = kern_type_is_r8(type[i]) && n_out[i] % 8 == 0 && n_out[i] > 0;
    if (!ok) {
        for (int i = 0; i < n; i++) fill_nan(y[i], (long)(n_out[i] > 0 ? n_out[i] : 0) * n_tok);
        return;
    }
    if (E->act_quant) {
        r8_q8_matmul(impl, E, n, y, x, w, type, n_out, n_in, n_tok);
        return;
    }
    /* f32 activations: kern.c's driver with this file's row-group leaves (the
     * AVX2 and VNNI impls share them) */
    kern_matmul_f32act_n(impl == KERN_R8_SCALAR ? KERN_ISA_SCALAR : KERN_ISA_AVX2, E, n, y, x, w, type, n_out, n_in, 0,
                    n_tok);
}

void kern_r8_matmul_impl(int impl, cf_env *E, float *y, const float *x, const void *w, int type,
                         int n_out, int n_in, int n_tok) {
    kern_r8_matmul_n_impl(impl, E, 1, &y, x, &w, &type, &n_out, n_in, n_tok);
}

void kern_r8_matmul(int isa, cf_env *E, float *y, const float *x, const void *w, int type, int n_out,
                    int n_in, int n_tok) {
    kern_r8_matmul_impl(kern_r8_impl_for_isa(isa), E, y, x, w, type, n_out, n_in, n_tok);
}

void kern_r8_matmul_n(int isa, cf_env *E, int n, float *const *y, const float *x, const void *const *w,
                      const int *type, const int *n_out, int n_in, int n_tok) {
    kern_r8_matmul_n_impl(kern_r8_impl_for_isa(isa), E, n, y, x, w, type, n_out, n_in, n_tok);
}
